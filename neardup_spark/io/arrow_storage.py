""":class:`~neardup_spark.io.filesystem.Storage` through PyArrow's file systems, in this
process, with no JVM: what a Spark Connect client uses for anything but local paths (S3, GCS,
ABFS, HDFS through libhdfs), with the credentials the driver's environment gives PyArrow.

Put-if-absent, the commit point of the leases and the index's log:

* HDFS: written under a temporary name, then renamed, which HDFS refuses when the target exists;
* S3: a conditional write (``If-None-Match: *``, S3 and most S3-compatible stores since 2024),
  through boto3 when it is installed;
* GCS and ABFS, or S3 without boto3: a check, then a write. Not atomic: two runs starting within
  the same moment could both take a lock (docs/operations/locking.md says how to avoid that).
"""

from __future__ import annotations

import builtins
import logging
import threading
from typing import Any

import pyarrow.fs as pafs

from neardup_spark.io.filesystem import (
    FileStatus,
    TextOnBytes,
    pyarrow_filesystem,
    temporary_name,
)

log = logging.getLogger(__name__)

_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def _warn_once(scheme: str, message: str) -> None:
    with _WARNED_LOCK:
        if scheme in _WARNED:
            return
        _WARNED.add(scheme)
    log.warning(message)


def _authority(path: str) -> str:
    """``s3://bucket`` of ``s3://bucket/x/y``; ``hdfs://nn:8020`` of ``hdfs://nn:8020/x``."""
    scheme, _, rest = path.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


class ArrowStorage(TextOnBytes):
    """Paths of one URI authority (``s3://bucket``, ``hdfs://namenode:8020``) through PyArrow.
    ``filesystem``: the PyArrow file system to use instead of the one the URI names, with
    inner paths ``authority-less`` as S3's (``bucket/key``): tests and custom endpoints."""

    def __init__(self, root: str, filesystem: pafs.FileSystem | None = None) -> None:
        self._authority = _authority(root)
        self._scheme = self._authority.partition("://")[0].lower()
        if filesystem is not None:
            self._fs, self._inner_prefix = filesystem, self._authority.partition("://")[2]
        else:
            self._fs, inner = pyarrow_filesystem(root)
            # What PyArrow keeps of the authority in its inner paths ("bucket" for S3 and GCS,
            # nothing for HDFS): the rest of the path follows it.
            tail = root[len(self._authority) :].rstrip("/")
            stripped = inner.rstrip("/")
            self._inner_prefix = stripped[: len(stripped) - len(tail)] if tail else stripped

    def _inner(self, path: str) -> str:
        if not path.startswith(self._authority):
            raise ValueError(f"{path} is not under {self._authority}")
        tail = path[len(self._authority) :].rstrip("/")
        return (self._inner_prefix + tail) or "/"

    def _outer(self, inner: str) -> str:
        return self._authority + inner[len(self._inner_prefix) :]

    def _info(self, path: str) -> pafs.FileInfo:
        return self._fs.get_file_info(self._inner(path))

    def _to_status(self, info: pafs.FileInfo) -> FileStatus:
        mtime = info.mtime_ns // 10**6 if info.mtime_ns is not None else 0
        is_dir = info.type == pafs.FileType.Directory
        return FileStatus(self._outer(info.path), int(info.size or 0), mtime, is_dir)

    def status(self, path: str) -> FileStatus | None:
        info = self._info(path)
        return None if info.type == pafs.FileType.NotFound else self._to_status(info)

    def exists(self, path: str) -> bool:
        return self._info(path).type != pafs.FileType.NotFound

    def list(self, path: str) -> list[str]:
        if self._info(path).type != pafs.FileType.Directory:
            return []
        selector = pafs.FileSelector(self._inner(path), allow_not_found=True)
        return sorted(info.base_name for info in self._fs.get_file_info(selector))

    def walk_files(self, path: str) -> builtins.list[FileStatus]:
        selector = pafs.FileSelector(self._inner(path), allow_not_found=True, recursive=True)
        infos = self._fs.get_file_info(selector)
        return sorted(
            (self._to_status(i) for i in infos if i.type == pafs.FileType.File),
            key=lambda s: s.path,
        )

    def read_bytes(self, path: str) -> bytes | None:
        try:
            with self._fs.open_input_stream(self._inner(path)) as stream:
                return bytes(stream.read())
        except FileNotFoundError:
            return None

    def write_bytes(self, path: str, data: bytes) -> None:
        inner = self._inner(path)
        parent = inner.rpartition("/")[0]
        if parent:
            self._fs.create_dir(parent, recursive=True)
        with self._fs.open_output_stream(inner) as stream:
            stream.write(data)

    def replace_text(self, path: str, text: str) -> None:
        """On HDFS a rename over the old file; on object stores a single PUT, which readers see
        whole or not at all."""
        if self._scheme in ("hdfs", "viewfs"):
            tmp = temporary_name(path)
            self.write_text(tmp, text)
            self.delete(path)
            self._fs.move(self._inner(tmp), self._inner(path))
        else:
            self.write_text(path, text)

    def rename(self, src: str, dst: str) -> None:
        if self.exists(dst):
            raise FileExistsError(f"cannot rename {src} to {dst}: it exists")
        directory = self._info(src).type == pafs.FileType.Directory
        if directory and self._scheme not in ("hdfs", "viewfs"):
            self._move_tree(src, dst)
        else:
            self._fs.move(self._inner(src), self._inner(dst))

    def _move_tree(self, src: str, dst: str) -> None:
        """A directory on an object store (which has none to rename: PyArrow's move copies one
        object): every file copied, then the source deleted, so a failure part way leaves the
        source whole (a commit's staged output is then still there for the rerun)."""
        source, target = self._inner(src).rstrip("/"), self._inner(dst).rstrip("/")
        selector = pafs.FileSelector(source, recursive=True)
        files = [i.path for i in self._fs.get_file_info(selector) if i.type == pafs.FileType.File]
        self._fs.create_dir(target, recursive=True)
        for path in files:
            self._fs.copy_file(path, target + path[len(source) :])
        self._fs.delete_dir(source)

    def delete(self, path: str) -> None:
        info = self._info(path)
        if info.type == pafs.FileType.Directory:
            self._fs.delete_dir(self._inner(path))
        elif info.type != pafs.FileType.NotFound:
            self._fs.delete_file(self._inner(path))

    def put_if_absent(self, path: str, text: str) -> bool:
        data = text.encode("utf-8")
        if self._scheme in ("hdfs", "viewfs"):
            tmp = temporary_name(path)
            self.write_bytes(tmp, data)
            try:
                self._fs.move(self._inner(tmp), self._inner(path))  # HDFS: fails if it exists
            except OSError:
                self.delete(tmp)
                if self.exists(path):
                    return False
                raise
            return True
        if self._scheme in ("s3", "s3a", "s3n"):
            created = _s3_create_if_absent(self._fs, self._inner(path), data)
            if created is not None:
                return created
        _warn_once(
            self._scheme,
            f"put-if-absent on {self._scheme}:// is a check then a write here, not atomic: two "
            "runs starting at the same moment could both take one lock "
            "(docs/operations/locking.md)",
        )
        if self.exists(path):
            return False
        self.write_bytes(path, data)
        return True

    def checksum(self, path: str) -> str | None:
        return None


def _s3_create_if_absent(fs: pafs.FileSystem, inner: str, data: bytes) -> bool | None:
    """An S3 conditional PUT (``If-None-Match: *``) through boto3, with the endpoint, region and
    credentials PyArrow's S3 file system was given (else boto3's own defaults); None when boto3
    is not installed or the store does not take the condition."""
    try:
        import boto3
        from botocore.exceptions import ClientError
    except ImportError:
        return None
    bucket, _, key = inner.partition("/")
    client = boto3.client("s3", **_boto3_options(fs))
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
            return False
        if code in ("NotImplemented", "501"):
            return None  # a store without conditional writes: check, then write
        raise
    return True


def _boto3_options(fs: pafs.FileSystem) -> dict[str, Any]:
    """boto3 client options matching a PyArrow S3 file system's (what it pickles itself with)."""
    try:
        given = fs.__reduce__()[1][0]
    except Exception:  # not PyArrow's S3 file system: boto3's defaults
        return {}
    if not isinstance(given, dict):
        return {}
    options: dict[str, Any] = {}
    if given.get("region"):
        options["region_name"] = given["region"]
    endpoint = given.get("endpoint_override")
    if endpoint:
        scheme = given.get("scheme") or "https"
        options["endpoint_url"] = endpoint if "://" in endpoint else f"{scheme}://{endpoint}"
    if given.get("access_key") and given.get("secret_key"):
        options["aws_access_key_id"] = given["access_key"]
        options["aws_secret_access_key"] = given["secret_key"]
        if given.get("session_token"):
            options["aws_session_token"] = given["session_token"]
    return options
