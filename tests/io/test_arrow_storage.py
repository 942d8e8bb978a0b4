"""The PyArrow storage (what a Spark Connect client uses for object stores): against a real S3
API on loopback (moto's S3 server, in a process of its own), with S3's conditional writes as
the atomic put-if-absent; and PyArrow's in-memory file system for the generic path."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from neardup_spark.bench.standalone import free_port
from neardup_spark.io.arrow_storage import ArrowStorage
from neardup_spark.io.filesystem import write_parquet_file
from neardup_spark.io.lease import LockTimeout, acquire

pytest.importorskip("moto", reason="the dev extra's moto runs the S3 server")
pytest.importorskip("boto3", reason="the s3 extra's boto3 makes the conditional writes")
BUCKET = "neardup-test"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3 server on a free loopback port, with one bucket."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://{endpoint}/", timeout=1)
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "no S3 server"
                time.sleep(0.2)
        import boto3

        os.environ.update(CREDENTIALS)
        boto3.client("s3", endpoint_url=f"http://{endpoint}").create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=30)


def s3_storage(endpoint: str, root: str) -> ArrowStorage:
    fs = pafs.S3FileSystem(
        endpoint_override=endpoint,
        scheme="http",
        access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region=CREDENTIALS["AWS_DEFAULT_REGION"],
    )
    return ArrowStorage(root, filesystem=fs)


def test_s3_storage_files(s3_endpoint):
    root = f"s3://{BUCKET}/files"
    storage = s3_storage(s3_endpoint, root)
    storage.write_text(f"{root}/a/b.txt", "one\n")
    storage.replace_text(f"{root}/a/b.txt", "two\n")
    storage.write_bytes(f"{root}/a/c/d.bin", b"\0\1")
    assert storage.read_text(f"{root}/a/b.txt") == "two\n"
    assert storage.read_bytes(f"{root}/missing") is None
    assert storage.list(f"{root}/a") == ["b.txt", "c"]
    status = storage.status(f"{root}/a/b.txt")
    assert status is not None and (status.path, status.size, status.is_dir) == (
        f"{root}/a/b.txt",
        4,
        False,
    )
    assert [s.path for s in storage.walk_files(root)] == [f"{root}/a/b.txt", f"{root}/a/c/d.bin"]
    storage.rename(f"{root}/a/b.txt", f"{root}/e.txt")
    with pytest.raises(FileExistsError):
        storage.rename(f"{root}/a/c/d.bin", f"{root}/e.txt")
    # A directory (a commit moves staged tables so): PyArrow's S3 move copies one object only.
    storage.write_bytes(f"{root}/t/part-0.parquet", b"0")
    storage.write_bytes(f"{root}/t/sub/part-1.parquet", b"11")
    storage.rename(f"{root}/t", f"{root}/moved")
    assert [(s.path, s.size) for s in storage.walk_files(f"{root}/moved")] == [
        (f"{root}/moved/part-0.parquet", 1),
        (f"{root}/moved/sub/part-1.parquet", 2),
    ]
    assert not storage.exists(f"{root}/t")
    storage.delete(f"{root}/moved")
    storage.delete(f"{root}/a")
    assert storage.list(root) == ["e.txt"] and not storage.exists(f"{root}/a/c/d.bin")


def _race(endpoint: str, path: str, text: str) -> bool:
    os.environ.update(CREDENTIALS)
    return s3_storage(endpoint, path).put_if_absent(path, text)


def test_s3_put_if_absent_is_a_conditional_write(s3_endpoint):
    """Eight processes create one object at once: exactly one succeeds, and the object holds
    its whole text (S3's If-None-Match: *, not a check then a write)."""
    path = f"s3://{BUCKET}/race/_lock"
    with ProcessPoolExecutor(8) as pool:
        won = list(
            pool.map(_race, [s3_endpoint] * 8, [path] * 8, [f"writer {i}\n" for i in range(8)])
        )
    assert won.count(True) == 1
    winner = won.index(True)
    assert s3_storage(s3_endpoint, path).read_text(path) == f"writer {winner}\n"


def test_a_lease_on_s3(s3_endpoint):
    root = f"s3://{BUCKET}/index"
    storage = s3_storage(s3_endpoint, root)
    lease = acquire(storage, root, "night on s3", heartbeat_seconds=0.2)
    with pytest.raises(LockTimeout, match="night on s3"):
        acquire(storage, root, "second night", 0)
    time.sleep(0.5)  # a heartbeat or two
    assert lease.held()
    lease.release()
    assert storage.list(root) == []
    acquire(storage, root, "third night", 0).release()


def test_the_generic_path_on_another_store(caplog):
    """A store without conditional writes here (PyArrow's in-memory file system standing in
    for GCS or ABFS): put-if-absent checks, then writes, and says once that it is not atomic."""
    storage = ArrowStorage("mem://bucket/root", filesystem=pafs._MockFileSystem())
    with caplog.at_level("WARNING", logger="neardup_spark.io.arrow_storage"):
        assert storage.put_if_absent("mem://bucket/root/_lock", "first\n")
        assert not storage.put_if_absent("mem://bucket/root/_lock", "second\n")
    assert storage.read_text("mem://bucket/root/_lock") == "first\n"
    assert sum("not atomic" in r.getMessage() for r in caplog.records) == 1
    storage.write_text("mem://bucket/root/x/y", "z")
    assert storage.list("mem://bucket/root") == ["_lock", "x"]
    storage.delete("mem://bucket/root/x")
    assert storage.list("mem://bucket/root") == ["_lock"]


def test_hadoop_s3_schemes_take_the_conditional_write(s3_endpoint, caplog):
    """``s3a://`` (Hadoop's name for S3) goes through the same conditional write: no warning
    that the create is not atomic."""
    path = f"s3a://{BUCKET}/s3a-root/_lock"
    storage = s3_storage(s3_endpoint, f"s3a://{BUCKET}/s3a-root")
    with caplog.at_level("WARNING", logger="neardup_spark.io.arrow_storage"):
        assert storage.put_if_absent(path, "one\n")
        assert not storage.put_if_absent(path, "two\n")
    assert storage.read_text(path) == "one\n"
    assert not any("not atomic" in r.getMessage() for r in caplog.records)


def test_a_parquet_file_written_through_a_remote_storage():
    """A table the driver writes to a remote path goes through the path's storage (its bytes
    written by it, with its credentials), not through a file system PyArrow opens itself."""
    fs = pafs._MockFileSystem()
    storage = ArrowStorage("mem://bucket/root", filesystem=fs)
    table = pa.table({"doc_id": ["a", "b"], "cluster_id": ["a", "a"]})
    write_parquet_file("mem://bucket/root/clusters/part-00000.parquet", table, storage)
    data = storage.read_bytes("mem://bucket/root/clusters/part-00000.parquet")
    assert data is not None and pq.read_table(pa.BufferReader(data)).equals(table)
