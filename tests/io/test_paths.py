"""User paths: which are URIs, their OS and Hadoop forms, what Spark's ``inputFiles()`` gives
back, and the check that OUTPUT (or the index) can be written."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.corpus import files_read, read_corpus
from neardup_spark.io.filesystem import LocalStorage, is_local, pyarrow_filesystem
from neardup_spark.io.paths import check_writable, for_hadoop, local_path, scheme_of

ODD = " é%#=,:"


def hadoop_path(spark, path):
    """Hadoop's own Path for ``path``, as a classic session's JVM reads it."""
    return spark.sparkContext._jvm.org.apache.hadoop.fs.Path(for_hadoop(path))


@pytest.mark.parametrize(
    ("given", "scheme"),
    [
        ("/data/a:b", None),
        ("2026:12/day", None),
        ("a:b", None),
        ("file:/x", "file"),
        ("file:///x#y", "file"),
        ("hdfs://nn/x", "hdfs"),
        ("s3a://bucket/a b", "s3a"),
        ("C:/data", None),
    ],
)
def test_what_is_a_uri(given, scheme):
    assert scheme_of(given) == scheme
    assert is_local(given) == (scheme in (None, "file"))


def test_local_forms_agree_on_odd_names(tmp_path):
    """The OS, PyArrow and the local storage name the same file for a plain path and a
    ``file:`` URI, characters taken literally (``%20`` is three characters, ``#`` no fragment)."""
    target = tmp_path / f"dir{ODD}%20" / "f.txt"
    target.parent.mkdir()
    target.write_text("x")
    for given in (str(target), "file:" + str(target), "file://" + str(target)):
        assert local_path(given) == str(target)
        assert pyarrow_filesystem(given)[1] == str(target)
        assert LocalStorage().read_text(given) == "x"


def test_hadoop_and_spark_round_trip(spark, tmp_path, monkeypatch):
    """Hadoop reads the names as given (a relative one with ``:`` made absolute), and the files
    Spark says it read (percent-encoded URIs) come back as names Hadoop finds."""
    directory = tmp_path / f"in{ODD}%41"
    directory.mkdir()
    pq.write_table(pa.table({"id": [1]}), directory / "p é%#=,.parquet")
    monkeypatch.chdir(tmp_path)
    assert for_hadoop(f"in{ODD}%41") == str(directory)
    jpath = hadoop_path(spark, f"file://{directory}")
    assert jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(jpath)
    read = files_read(spark.read.parquet(str(directory)))
    assert read == [f"file:{directory}/p é%#=,.parquet"]
    fs = jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    assert fs.exists(hadoop_path(spark, read[0])) and os.path.exists(local_path(read[0]))


def test_a_file_named_with_a_colon_is_refused(spark, tmp_path):
    """Hadoop's local file system cannot open a file whose own name holds ':' (its checksum
    file's name parses as a URI); exit 2 naming it, not a stack trace. Directories may."""
    directory = tmp_path / "a:b"
    directory.mkdir()
    pq.write_table(pa.table({"id": [1], "text": ["x"]}), directory / "part:1.parquet")
    with pytest.raises(UserError, match=r"cannot read file:.*a:b/part:1.parquet: .* holds ':'"):
        read_corpus(spark, str(directory))


def test_output_under_a_regular_file_is_refused(tmp_path):
    (tmp_path / "somefile.txt").write_text("x")
    with pytest.raises(
        UserError, match=r"output .*somefile.txt/out/deeper cannot be created: .* is a file"
    ):
        check_writable(str(tmp_path / "somefile.txt" / "out" / "deeper"), "output")
    with pytest.raises(UserError, match="exists and is a file"):
        check_writable("file://" + str(tmp_path / "somefile.txt"), "index")
    check_writable(str(tmp_path / "new" / "dir"), "output")  # created later: fine
    assert sorted(os.listdir(tmp_path)) == ["somefile.txt"]  # the probe left nothing


def test_output_in_a_directory_that_refuses_writes_is_refused():
    """Tests run as root, for whom permission bits do not stop writes: /proc refuses new files
    to root too (a read-only mount would do the same); the probe write is what finds it."""
    with pytest.raises(
        UserError, match=r"index /proc/neardup-out is not writable: cannot write in /proc"
    ):
        check_writable("/proc/neardup-out", "index")
