"""Input formats told by file names, and paths that must stay apart (no Spark)."""

from __future__ import annotations

import os

import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.corpus import CorpusSource, check_paths_apart, comparable_path
from neardup_spark.io.formats import format_of, guess_format


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("part-00000-3c1e.c000.snappy.parquet", "parquet"),
        ("s3a://b/crawl/x.parq", "parquet"),
        ("shard_00001.jsonl.gz", "json"),
        ("the-pile/00.jsonl.zst", "json"),
        ("dolma/v1/en-0001.json.gz", "json"),
        ("part-00000-1f.c000.json.zstd", "json"),
        ("x.ndjson.bz2", "json"),
        ("x.ORC", "orc"),
        ("part-0.snappy.orc", "orc"),
        ("table.csv", "csv"),
        ("table.csv.gz", "csv"),
        ("part-00000", None),
        (".gz", None),
        ("notes.txt", None),
    ],
)
def test_format_of_a_file_name(name, fmt):
    assert format_of(name) == fmt


def test_guess_format_needs_one_format_told_by_every_name():
    assert guess_format(["a/x.jsonl.gz", "a/y.json"], "a") == "json"
    with pytest.raises(UserError, match=r"cannot tell the format of a from its file names \(a/z\)"):
        guess_format(["a/x.jsonl.gz", "a/z"], "a")
    with pytest.raises(UserError, match=r"pass --input-format parquet\|json\|orc\|csv"):
        guess_format(["a/z"], "a")
    with pytest.raises(UserError, match="mixes file formats"):
        guess_format(["a/x.parquet", "a/y.csv"], "a")


def test_a_source_is_a_path_or_a_table():
    assert CorpusSource.of("x").shown == "x"
    assert CorpusSource(table="db.t").shown == "table db.t"
    with pytest.raises(UserError, match="not both"):
        CorpusSource("x", "db.t")
    with pytest.raises(UserError, match="give the input: a path"):
        CorpusSource()
    with pytest.raises(UserError, match="--input-format must be one of"):
        CorpusSource("x", format="avro")
    with pytest.raises(UserError, match="not to --input-table"):
        CorpusSource(table="t", format="json")


def test_paths_are_compared_absolute():
    here = os.getcwd()
    assert comparable_path("data/") == f"{here}/data"
    assert comparable_path("file:///tmp/x/") == "/tmp/x"
    assert comparable_path("file:/tmp/x") == "/tmp/x"
    assert comparable_path("s3a://b/x/") == "s3a://b/x"


@pytest.mark.parametrize(
    ("input_path", "output", "refused"),
    [
        ("/d/crawl", "/d/crawl/out", True),  # output inside input
        ("/d/crawl/part", "/d/crawl", True),  # input inside output
        ("/d/crawl", "/d/crawl/", True),
        ("/d/crawl", "/d/crawl-out", False),
        ("/d/*.parquet", "/d/out", False),  # the glob cannot match anything under /d/out
        ("/d/*/part-*.parquet", "/d/out", True),  # /d/out/part-0.parquet would match
        ("/d/*/part-*.parquet", "/e/out", False),
        ("/d/2025-*", "/d/2025-06-out", True),
        ("/d/x/*.jsonl.gz", "/d", True),
        ("s3a://b/crawl", "s3a://b/crawl/out", True),
        ("s3a://b/crawl", "s3a://b/out", False),
    ],
)
def test_output_and_input_must_not_overlap(input_path, output, refused):
    if refused:
        with pytest.raises(UserError, match="must not overlap"):
            check_paths_apart({"input": input_path, "output": output})
    else:
        check_paths_apart({"input": input_path, "output": output})


def test_relative_and_absolute_paths_are_the_same_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="must not overlap"):
        check_paths_apart({"input": "crawl", "output": str(tmp_path / "crawl" / "out")})
