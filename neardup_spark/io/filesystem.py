"""One file-system layer: local paths through the OS (atomic ``os.replace``), anything else
(HDFS, object stores) through Hadoop's FileSystem API in the JVM; PyArrow file systems for
driver-side reading without Spark (reports, evaluation, ingest)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from neardup_spark.io.paths import for_hadoop, is_local_path, local_path

# Hadoop's names for schemes PyArrow knows by another.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def pyarrow_filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """A PyArrow file system and the path inside it, for the paths users give and Spark
    writes: plain local paths (``~`` expanded, made absolute), ``file:/x`` and ``file:///x``,
    and URIs PyArrow reads (``s3://``, ``gs://``, ``hdfs://``; Hadoop's ``s3a://`` and
    ``s3n://`` mean ``s3://``)."""
    if is_local_path(path):
        return pafs.LocalFileSystem(), os.path.abspath(local_path(path))
    if "://" in path:
        scheme = path.split("://", 1)[0].lower()
        if scheme in _SCHEME_ALIASES:
            path = _SCHEME_ALIASES[scheme] + path[len(scheme) :]
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), os.path.abspath(local_path(path))


def hadoop_path(spark: SparkSession, path: str) -> Any:
    """The JVM's ``org.apache.hadoop.fs.Path`` for ``path`` (:func:`~neardup_spark.io.paths.
    for_hadoop`: a relative name with a ``:`` made absolute)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a live SparkContext has its gateway
    return jvm.org.apache.hadoop.fs.Path(for_hadoop(path))


def hadoop_filesystem(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """The JVM's ``(FileSystem, Path)`` for ``path``."""
    hpath = hadoop_path(spark, path)
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def is_local(path: str) -> bool:
    """True for a plain path or a ``file:`` URI (:mod:`neardup_spark.io.paths`)."""
    return is_local_path(path)


def join(root: str, *parts: str) -> str:
    """``root/part/...`` for paths and URIs alike."""
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


def sibling(path: str, name: str) -> str:
    """A path next to ``path`` called ``name``."""
    trimmed = path.rstrip("/")
    parent, _, _ = trimmed.rpartition("/")
    if not parent and not trimmed.startswith("/"):
        return name
    return f"{parent}/{name}"


def basename(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]


def parent(path: str) -> str:
    """The directory holding ``path`` (``.`` for a bare relative name)."""
    trimmed = path.rstrip("/")
    head, sep, _ = trimmed.rpartition("/")
    if not sep:
        return "."
    return head or "/"


class Storage(Protocol):
    """The few file-system operations the index and the published outputs need."""

    def exists(self, path: str) -> bool: ...

    def list(self, path: str) -> list[str]: ...

    def read_text(self, path: str) -> str | None: ...

    def write_text(self, path: str, text: str) -> None: ...

    def replace_text(self, path: str, text: str) -> None: ...

    def rename(self, src: str, dst: str) -> None: ...

    def delete(self, path: str) -> None: ...

    def put_if_absent(self, path: str, text: str) -> bool:
        """Create ``path`` holding ``text`` unless it exists, atomically: True when this call
        created it. A reader sees either no file or the whole text (the commit point of the
        index and the leases, :mod:`neardup_spark.io.lease`)."""
        ...


class LocalStorage:
    """Local paths (``/x``, ``x``, ``file:/x``) through the OS."""

    @staticmethod
    def local_path(path: str) -> Path:
        return Path(local_path(path))

    def exists(self, path: str) -> bool:
        return self.local_path(path).exists()

    def list(self, path: str) -> list[str]:
        p = self.local_path(path)
        return sorted(os.listdir(p)) if p.is_dir() else []

    def read_text(self, path: str) -> str | None:
        try:
            return self.local_path(path).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_text(self, path: str, text: str) -> None:
        p = self.local_path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    def replace_text(self, path: str, text: str) -> None:
        """Write ``text`` to a temporary file, then rename it over ``path`` (atomic)."""
        p = self.local_path(path)
        tmp = p.with_name(f".{p.name}.{uuid.uuid4().hex[:8]}.tmp")
        self.write_text(str(tmp), text)
        os.replace(tmp, p)
        dir_fd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def rename(self, src: str, dst: str) -> None:
        os.rename(self.local_path(src), self.local_path(dst))

    def put_if_absent(self, path: str, text: str) -> bool:
        """The text written and synced under a temporary name, then hard-linked to ``path``:
        ``link(2)`` fails when ``path`` exists, and never shows a half-written file."""
        p = self.local_path(path)
        tmp = p.with_name(f".{p.name}.{uuid.uuid4().hex[:8]}.tmp")
        self.write_text(str(tmp), text)
        try:
            os.link(tmp, p)
        except FileExistsError:
            return False
        finally:
            tmp.unlink()
        dir_fd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return True

    def delete(self, path: str) -> None:
        p = self.local_path(path)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists() or p.is_symlink():
            p.unlink()


class HadoopStorage:
    """Any Hadoop-supported file system (HDFS, object stores) through the JVM."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        gateway = spark.sparkContext._gateway
        assert gateway is not None
        self._gateway = gateway
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = jvm.org.apache.hadoop.fs.Path(root).getFileSystem(self._conf)

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def list(self, path: str) -> list[str]:
        if not self.exists(path):
            return []
        return sorted(str(s.getPath().getName()) for s in self._fs.listStatus(self._path(path)))

    def read_text(self, path: str) -> str | None:
        if not self.exists(path):
            return None
        stream = self._fs.open(self._path(path))
        try:
            reader = self._jvm.java.io.BufferedReader(
                self._jvm.java.io.InputStreamReader(stream, "UTF-8")
            )
            lines = []
            line = reader.readLine()
            while line is not None:
                lines.append(line)
                line = reader.readLine()
            return "\n".join(lines) + ("\n" if lines else "")
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def replace_text(self, path: str, text: str) -> None:
        tmp = sibling(path, f".{basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
        self.write_text(tmp, text)
        fs_pkg = self._jvm.org.apache.hadoop.fs
        context = fs_pkg.FileContext.getFileContext(self._path(path).toUri(), self._conf)
        options = self._gateway.new_array(fs_pkg.Options.Rename, 1)
        options[0] = fs_pkg.Options.Rename.OVERWRITE
        context.rename(self._path(tmp), self._path(path), options)

    def rename(self, src: str, dst: str) -> None:
        if not self._fs.rename(self._path(src), self._path(dst)):
            raise OSError(f"cannot rename {src} to {dst}")

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def put_if_absent(self, path: str, text: str) -> bool:
        """The text written under a temporary name, then renamed to ``path`` without
        overwriting (``FileContext.rename``): atomic on HDFS, and a reader never sees a partial
        file; on object stores (S3A) a rename is a check then a copy, not safe against a second
        writer (docs/operations/locking.md)."""
        tmp = sibling(path, f".{basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
        self.write_text(tmp, text)
        fs_pkg = self._jvm.org.apache.hadoop.fs
        context = fs_pkg.FileContext.getFileContext(self._path(path).toUri(), self._conf)
        options = self._gateway.new_array(fs_pkg.Options.Rename, 1)
        options[0] = fs_pkg.Options.Rename.NONE
        try:
            context.rename(self._path(tmp), self._path(path), options)
        except Exception as exc:  # py4j wraps Java's FileAlreadyExistsException
            self.delete(tmp)
            if "FileAlreadyExists" in str(exc) or self.exists(path):
                return False
            raise
        return True


def storage_for(spark: SparkSession, path: str) -> Storage:
    """The :class:`Storage` serving ``path``."""
    return LocalStorage() if is_local(path) else HadoopStorage(spark, path)


def copy_tree(spark: SparkSession, src: str, dst: str) -> None:
    """Copy a file or directory tree (across file systems too)."""
    if is_local(src) and is_local(dst):
        s, d = LocalStorage.local_path(src), LocalStorage.local_path(dst)
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_dir():
            shutil.copytree(s, d)
        else:
            shutil.copy2(s, d)
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    src_path, dst_path = hadoop_path(spark, src), hadoop_path(spark, dst)
    src_fs, dst_fs = src_path.getFileSystem(conf), dst_path.getFileSystem(conf)
    if not jvm.org.apache.hadoop.fs.FileUtil.copy(src_fs, src_path, dst_fs, dst_path, False, conf):
        raise OSError(f"cannot copy {src} to {dst}")


def write_parquet_file(path: str, table: pa.Table) -> None:
    """One Parquet file written by this process (PyArrow), its directory created; for the small
    tables a driver-side step writes (Spark reads them as any Parquet)."""
    fs, inner = pyarrow_filesystem(path)
    fs.create_dir(inner.rpartition("/")[0], recursive=True)
    pq.write_table(table, inner, filesystem=fs)
