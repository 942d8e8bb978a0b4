""":class:`~neardup_spark.io.filesystem.Storage` through Hadoop's FileSystem API in the
session's JVM (classic Spark only: it needs py4j): HDFS, and the object stores whose connectors
the cluster has (S3A, GCS, ABFS)."""

from __future__ import annotations

import builtins
from time import sleep
from typing import Any

from neardup_spark.io.filesystem import FileStatus, TextOnBytes, temporary_name
from neardup_spark.io.paths import for_hadoop

# Reads of a file whose bytes and checksum disagree (see HadoopStorage.read_bytes), and the wait
# before the next (times the attempt's number).
READ_ATTEMPTS = 5
REREAD_SECONDS = 0.02


class HadoopStorage(TextOnBytes):
    """Any Hadoop-supported file system through the JVM (``hadoop_conf``: the session's Hadoop
    configuration, :meth:`~neardup_spark.runtime.engine.Engine.hadoop_configuration`)."""

    def __init__(self, hadoop_conf: Any, root: str) -> None:
        self._conf = hadoop_conf
        self._jvm = _gateway_jvm()
        # Resolved once: py4j looks each name of ``jvm.org.apache.hadoop.fs.Path`` up in the
        # JVM (five round trips, four failed class lookups over every jar: ~0.8 ms a path).
        self._fs_package = self._jvm.org.apache.hadoop.fs
        self._path_class = self._fs_package.Path
        self._fs = self._path(root).getFileSystem(self._conf)

    def _path(self, path: str) -> Any:
        return self._path_class(for_hadoop(path))

    def _status(self, status: Any) -> FileStatus:
        return FileStatus(
            str(status.getPath().toString()),
            int(status.getLen()),
            int(status.getModificationTime()),
            bool(status.isDirectory()),
        )

    def status(self, path: str) -> FileStatus | None:
        hpath = self._path(path)
        if not self._fs.exists(hpath):
            return None
        return self._status(self._fs.getFileStatus(self._fs.makeQualified(hpath)))

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def list(self, path: str) -> list[str]:
        hpath = self._path(path)
        if not self._fs.exists(hpath) or not self._fs.getFileStatus(hpath).isDirectory():
            return []
        return sorted(str(s.getPath().getName()) for s in self._fs.listStatus(hpath))

    def walk_files(self, path: str) -> builtins.list[FileStatus]:
        out = []
        entries = self._fs.listFiles(self._path(path), True)
        while entries.hasNext():
            out.append(self._status(entries.next()))
        return sorted(out, key=lambda s: s.path)

    def read_bytes(self, path: str) -> bytes | None:
        """The file's bytes, None if it does not exist. A checksum error is read again a few
        times: on a checksummed file system (Hadoop's ``file://``, which keeps a ``.crc`` beside
        each file) a file replaced while read (a lease's heartbeat) has its new bytes renamed in
        before their checksum file, so a reader may briefly see the two disagree."""
        for attempt in range(1, READ_ATTEMPTS + 1):
            try:
                return self._read_once(path)
            except Exception as exc:  # py4j wraps Java's ChecksumException
                if "ChecksumException" not in str(exc) or attempt == READ_ATTEMPTS:
                    raise
                sleep(REREAD_SECONDS * attempt)
        return None  # not reached: the last attempt returns or raises

    def _read_once(self, path: str) -> bytes | None:
        hpath = self._path(path)
        if not self._fs.exists(hpath):
            return None
        stream = self._fs.open(hpath)
        try:
            return bytes(stream.readAllBytes())
        finally:
            stream.close()

    def write_bytes(self, path: str, data: bytes) -> None:
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def _rename(self, src: str, dst: str, overwrite: bool) -> None:
        fs_pkg = self._fs_package
        context = fs_pkg.FileContext.getFileContext(self._path(dst).toUri(), self._conf)
        options = _gateway().new_array(fs_pkg.Options.Rename, 1)
        options[0] = fs_pkg.Options.Rename.OVERWRITE if overwrite else fs_pkg.Options.Rename.NONE
        context.rename(self._path(src), self._path(dst), options)

    def replace_text(self, path: str, text: str) -> None:
        tmp = temporary_name(path)
        self.write_text(tmp, text)
        self._rename(tmp, path, overwrite=True)

    def rename(self, src: str, dst: str) -> None:
        if self._fs.exists(self._path(dst)):
            raise FileExistsError(f"cannot rename {src} to {dst}: it exists")
        if not self._fs.rename(self._path(src), self._path(dst)):
            raise OSError(f"cannot rename {src} to {dst}")

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def put_if_absent(self, path: str, text: str) -> bool:
        """The text written under a temporary name, then renamed to ``path`` without
        overwriting (``FileContext.rename``): atomic on HDFS, and a reader never sees a partial
        file; on object stores (S3A) a rename is a check then a copy, not safe against a second
        writer (docs/operations/locking.md)."""
        tmp = temporary_name(path)
        self.write_text(tmp, text)
        try:
            self._rename(tmp, path, overwrite=False)
        except Exception as exc:  # py4j wraps Java's FileAlreadyExistsException
            self.delete(tmp)
            if "FileAlreadyExists" in str(exc) or self.exists(path):
                return False
            raise
        return True

    def checksum(self, path: str) -> str | None:
        found = self._fs.getFileChecksum(self._path(path))
        return None if found is None else f"{found.getAlgorithmName()}:{found.toString()}"


def _gateway() -> Any:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    assert gateway is not None  # a classic session is running
    return gateway


def _gateway_jvm() -> Any:
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    assert jvm is not None
    return jvm
