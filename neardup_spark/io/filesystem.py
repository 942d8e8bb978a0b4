"""One file-system layer: a small :class:`Storage` interface (status, list, read, write,
rename, delete, put-if-absent) that the atomic commits, the leases, the listings of the input,
its digests and the index's files are all built on, and three implementations:

* :class:`LocalStorage`: local paths (``/x``, ``x``, ``file:/x``) through the OS, in every kind
  of session: ``link(2)`` is the atomic put-if-absent, ``rename(2)`` the atomic replace;
* :class:`~neardup_spark.io.hadoop_storage.HadoopStorage`: any other scheme through Hadoop's
  FileSystem API in the JVM, where the session has one (classic Spark: HDFS, S3A, GCS, ABFS,
  whatever connectors the cluster has);
* :class:`~neardup_spark.io.arrow_storage.ArrowStorage`: any other scheme through PyArrow's file
  systems in this process (Spark Connect, where there is no JVM here: S3, GCS, ABFS, HDFS with
  the driver's own credentials).

:func:`neardup_spark.io.storage.storage_for` picks one by the path and by what the session offers
(the session's :class:`~neardup_spark.runtime.engine.Engine`). docs/operations/locking.md says
what each guarantees.
"""

from __future__ import annotations

import builtins
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from neardup_spark.io.globs import segment_regex, split_glob
from neardup_spark.io.paths import is_local_path, local_path

# Hadoop's names for schemes PyArrow knows by another.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def pyarrow_filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """A PyArrow file system and the path inside it, for the paths users give and Spark
    writes: plain local paths (``~`` expanded, made absolute), ``file:/x`` and ``file:///x``,
    and URIs PyArrow reads (``s3://``, ``gs://``, ``hdfs://``, ``abfss://``; Hadoop's ``s3a://``
    and ``s3n://`` mean ``s3://``)."""
    if is_local_path(path):
        return pafs.LocalFileSystem(), os.path.abspath(local_path(path))
    if "://" in path:
        scheme = path.split("://", 1)[0].lower()
        if scheme in _SCHEME_ALIASES:
            path = _SCHEME_ALIASES[scheme] + path[len(scheme) :]
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), os.path.abspath(local_path(path))


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


def temporary_name(path: str) -> str:
    """A unique hidden name next to ``path`` (readers of a dataset skip ``.*`` names)."""
    return sibling(path, f".{basename(path)}.{uuid.uuid4().hex[:8]}.tmp")


def hidden(name: str) -> bool:
    """Spark skips files and directories named ``_*`` and ``.*`` when it reads a directory."""
    return name.startswith(("_", "."))


@dataclass(frozen=True)
class FileStatus:
    """A file or directory: its qualified name (``file:/x`` for local files, as Hadoop names
    them; the URI elsewhere), size in bytes, modification time in milliseconds."""

    path: str
    size: int
    mtime_ms: int
    is_dir: bool


class Storage(Protocol):
    """The file-system operations the outputs, the index, the leases and the input listing
    need; paths are the ones users give (plain, ``file:``, or a URI of the storage)."""

    def status(self, path: str) -> FileStatus | None:
        """The file or directory at ``path``, None when nothing is there."""
        ...

    def exists(self, path: str) -> bool: ...

    def list(self, path: str) -> list[str]:
        """The names in directory ``path``, sorted ([] when it is missing or a file)."""
        ...

    def walk_files(self, path: str) -> builtins.list[FileStatus]:
        """Every file under directory ``path``, at any depth."""
        ...

    def read_bytes(self, path: str) -> bytes | None:
        """The whole file, None when it is missing."""
        ...

    def read_text(self, path: str) -> str | None: ...

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or truncate ``path`` (its directory created) holding ``data``."""
        ...

    def write_text(self, path: str, text: str) -> None: ...

    def replace_text(self, path: str, text: str) -> None:
        """Write ``text`` under a temporary name, then rename it over ``path``: a reader sees
        the old or the new text, never a part."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Move a file or directory; ``dst`` must not exist (OSError)."""
        ...

    def delete(self, path: str) -> None:
        """Remove a file or a directory tree; nothing there is no error."""
        ...

    def put_if_absent(self, path: str, text: str) -> bool:
        """Create ``path`` holding ``text`` unless it exists, atomically: True when this call
        created it. A reader sees either no file or the whole text (the commit point of the
        index and the leases, :mod:`neardup_spark.io.lease`)."""
        ...

    def checksum(self, path: str) -> str | None:
        """What the file system says of a file's content (Hadoop's checksum), if anything:
        input digests fall back to size and modification time without it."""
        ...


class TextOnBytes:
    """``read_text`` and ``write_text`` (UTF-8) of a storage's ``read_bytes`` and
    ``write_bytes``: the part every :class:`Storage` shares."""

    def read_bytes(self, path: str) -> bytes | None:
        raise NotImplementedError

    def write_bytes(self, path: str, data: bytes) -> None:
        raise NotImplementedError

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))


class LocalStorage(TextOnBytes):
    """Local paths (``/x``, ``x``, ``file:/x``) through the OS."""

    @staticmethod
    def local_path(path: str) -> Path:
        return Path(local_path(path))

    @staticmethod
    def qualified(path: Path | str) -> str:
        """``file:/abs/path``, the name Hadoop gives a local file."""
        return "file:" + os.path.abspath(path)

    def status(self, path: str) -> FileStatus | None:
        p = self.local_path(path)
        try:
            st = p.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStatus(self.qualified(p), st.st_size, st.st_mtime_ns // 10**6, p.is_dir())

    def exists(self, path: str) -> bool:
        return self.local_path(path).exists()

    def list(self, path: str) -> list[str]:
        p = self.local_path(path)
        return sorted(os.listdir(p)) if p.is_dir() else []

    def walk_files(self, path: str) -> builtins.list[FileStatus]:
        out = []
        for top, _, names in os.walk(self.local_path(path)):
            for name in names:
                status = self.status(os.path.join(top, name))
                if status is not None:
                    out.append(status)
        return sorted(out, key=lambda s: s.path)

    def read_bytes(self, path: str) -> bytes | None:
        try:
            return self.local_path(path).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_bytes(self, path: str, data: bytes) -> None:
        p = self.local_path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    @staticmethod
    def _sync_directory(directory: Path) -> None:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def replace_text(self, path: str, text: str) -> None:
        """Write ``text`` to a temporary file, then rename it over ``path`` (atomic)."""
        p = self.local_path(path)
        tmp = self.local_path(temporary_name(str(p)))
        self.write_text(str(tmp), text)
        os.replace(tmp, p)
        self._sync_directory(p.parent)

    def rename(self, src: str, dst: str) -> None:
        target = self.local_path(dst)
        if target.exists():
            raise FileExistsError(f"cannot rename {src} to {dst}: it exists")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.local_path(src), target)

    def put_if_absent(self, path: str, text: str) -> bool:
        """The text written and synced under a temporary name, then hard-linked to ``path``:
        ``link(2)`` fails when ``path`` exists, and never shows a half-written file."""
        p = self.local_path(path)
        tmp = self.local_path(temporary_name(str(p)))
        self.write_text(str(tmp), text)
        try:
            os.link(tmp, p)
        except FileExistsError:
            return False
        finally:
            tmp.unlink()
        self._sync_directory(p.parent)
        return True

    def delete(self, path: str) -> None:
        p = self.local_path(path)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists() or p.is_symlink():
            p.unlink()

    def checksum(self, path: str) -> str | None:
        return None  # local inputs are hashed whole (io/corpus.py)


def glob_status(storage: Storage, pattern: str) -> list[FileStatus]:
    """What a Hadoop glob matches (``*``, ``?``, ``[...]``, ``{a,b}``), hidden names skipped
    where a glob segment matches them (as Hadoop's globber does for ``_*`` and ``.*``)."""
    root, segments = split_glob(pattern)
    found = [root]
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        regex = segment_regex(segment)
        matched = []
        for directory in found:
            for name in storage.list(directory):
                if regex.fullmatch(name) and not (hidden(name) and not hidden(segment)):
                    matched.append(join(directory, name))
        if not last:
            matched = [m for m in matched if (s := storage.status(m)) is not None and s.is_dir]
        found = matched
    return [s for s in (storage.status(p) for p in sorted(found)) if s is not None]


def visible_files(storage: Storage, top: FileStatus) -> list[str]:
    """A file, or the files of a directory tree, skipping ``_*`` and ``.*`` names below it as
    Spark does."""
    if not top.is_dir:
        return [top.path]
    prefix = top.path.rstrip("/")
    files = []
    for status in storage.walk_files(top.path):
        relative = status.path[len(prefix) :]
        if not any(hidden(part) for part in relative.split("/") if part):
            files.append(status.path)
    return sorted(files)


def write_parquet_file(path: str, table: pa.Table, storage: Storage | None = None) -> None:
    """One Parquet file written by this process (PyArrow), its directory created; for the small
    tables a driver-side step writes (Spark reads them as any Parquet). ``storage``: the
    :class:`Storage` serving ``path`` (a remote one writes the bytes itself: Hadoop's file
    system, with the session's credentials, where PyArrow's would need its own)."""
    if storage is not None and not isinstance(storage, LocalStorage):
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer)
        storage.write_bytes(path, buffer.getvalue().to_pybytes())
        return
    fs, inner = pyarrow_filesystem(path)
    fs.create_dir(inner.rpartition("/")[0], recursive=True)
    pq.write_table(table, inner, filesystem=fs)
