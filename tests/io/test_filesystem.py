"""The file-system layer: the path forms users give and Spark writes, and local storage's
atomic replace."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from neardup_spark.io.filesystem import (
    LocalStorage,
    basename,
    join,
    parent,
    pyarrow_filesystem,
    sibling,
)


@pytest.mark.parametrize(
    ("given", "inner"),
    [
        ("/tmp/x/y", "/tmp/x/y"),
        ("file:/tmp/x/y", "/tmp/x/y"),
        ("file:///tmp/x/y", "/tmp/x/y"),
        ("relative/dir", os.path.abspath("relative/dir")),
        ("~/z", os.path.expanduser("~/z")),
    ],
)
def test_local_path_forms(given, inner):
    fs, got = pyarrow_filesystem(given)
    assert isinstance(fs, pafs.LocalFileSystem) and got == inner


def test_path_helpers():
    assert join("s3://b/root/", "/a/", "b") == "s3://b/root/a/b"
    assert sibling("/x/out/", "out.tmp") == "/x/out.tmp" and sibling("out", "o2") == "o2"
    assert basename("/x/out/") == "out" and parent("/x/out") == "/x" and parent("out") == "."


def test_local_storage_replaces_atomically(tmp_path):
    storage = LocalStorage()
    path = str(tmp_path / "dir" / "CURRENT")
    storage.write_text(path, "v1\n")
    storage.replace_text(path, "v2\n")
    assert storage.read_text(path) == "v2\n"
    assert storage.list(str(tmp_path / "dir")) == ["CURRENT"]  # no temporary file left
    storage.delete(str(tmp_path / "dir"))
    assert not storage.exists(str(tmp_path / "dir")) and storage.read_text(path) is None
