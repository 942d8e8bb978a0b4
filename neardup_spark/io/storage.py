"""Which :class:`~neardup_spark.io.filesystem.Storage` serves a path, for a session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

from pyspark.sql import SparkSession

from neardup_spark.io.arrow_storage import ArrowStorage
from neardup_spark.io.filesystem import FileStatus, LocalStorage, Storage, is_local, join
from neardup_spark.io.hadoop_storage import HadoopStorage
from neardup_spark.runtime.engine import engine_of


def storage_for(spark: SparkSession | None, path: str) -> Storage:
    """The :class:`Storage` serving ``path``: the OS for local paths; else Hadoop's file system
    in the session's JVM where it has one (classic), else PyArrow's in this process (Spark
    Connect, or no session)."""
    if is_local(path):
        return LocalStorage()
    hadoop = engine_of(spark).hadoop_configuration() if spark is not None else None
    if hadoop is not None:
        return HadoopStorage(hadoop, path)
    return ArrowStorage(path)


def copy_tree(spark: SparkSession | None, src: str, dst: str) -> None:
    """Copy a file or directory tree (across file systems too)."""
    source, target = storage_for(spark, src), storage_for(spark, dst)
    top = source.status(src)
    if top is None:
        raise FileNotFoundError(src)
    if isinstance(source, LocalStorage) and isinstance(target, LocalStorage):
        s, d = LocalStorage.local_path(src), LocalStorage.local_path(dst)
        d.parent.mkdir(parents=True, exist_ok=True)
        if top.is_dir:
            shutil.copytree(s, d)
        else:
            shutil.copy2(s, d)
        return
    for status, relative in _files_below(source, top):
        data = source.read_bytes(status.path)
        if data is None:
            raise FileNotFoundError(status.path)
        target.write_bytes(join(dst, relative) if relative else dst, data)


def _files_below(storage: Storage, top: FileStatus) -> Iterator[tuple[FileStatus, str]]:
    if not top.is_dir:
        yield top, ""
        return
    prefix = top.path.rstrip("/")
    for status in storage.walk_files(top.path):
        yield status, status.path[len(prefix) :].lstrip("/")
