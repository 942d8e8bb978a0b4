"""A file is read whole or not at all: each text file checked to its end (gzip, bzip2, zstd,
deflate, plain JSON lines and CSV), Parquet and ORC files by their footers; refused with the
file, its format and where reading stopped, or skipped whole with ``--skip-corrupt``."""

from __future__ import annotations

import bz2
import gzip
import json
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.corpus import read_corpus
from neardup_spark.io.finished import read_table, skipped_paths
from neardup_spark.io.formats import format_reader
from neardup_spark.io.whole_files import (
    DAMAGED,
    TRUNCATED,
    check_file,
    check_files_here,
    check_in_tasks,
    codec_of,
    spark_error_text,
)

ROWS = 2000


def zstd(data: bytes) -> bytes:
    """A zstd frame (PyArrow's codec: the compat venvs hold the core dependencies only)."""
    return pa.compress(data, codec="zstd", asbytes=True)


COMPRESS = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "zst": lambda data: zstd(data),
    "deflate": zlib.compress,
}


def json_lines(start: int, n: int) -> bytes:
    rows = ({"id": f"d{i}", "text": f"document {i} " + "word " * (i % 17)} for i in range(start, n))
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def csv_text(start: int, n: int) -> bytes:
    rows = "".join(
        f'd{i},"document {i}, with ""quotes""\nand a line break"\n' for i in range(start, n)
    )
    return ("id,text\n" + rows).encode()


@pytest.mark.parametrize("ext", sorted(COMPRESS))
def test_a_compressed_file_cut_anywhere_is_truncated_with_the_lines_before(tmp_path, ext):
    data = COMPRESS[ext](json_lines(0, ROWS))
    whole = tmp_path / f"whole.jsonl.{ext}"
    whole.write_bytes(data)
    assert check_file(str(whole), "json").reason is None
    assert check_file(str(whole), "json").lines_read == ROWS
    for cut in (1, 4, 9, len(data) // 2, len(data) - 12):
        path = tmp_path / f"cut{cut}.jsonl.{ext}"
        path.write_bytes(data[: len(data) - cut])
        found = check_file(str(path), "json")
        assert found.reason == TRUNCATED, (cut, found)
        assert found.stopped_at_byte == len(data) - cut
        assert f"stops at byte {len(data) - cut:,}, the end of the file" in found.where
        assert found.lines_read is not None and found.lines_read <= ROWS


def test_gzip_counts_the_whole_lines_before_the_cut_and_members_one_after_another(tmp_path):
    text = json_lines(0, ROWS)
    data = gzip.compress(text)
    (tmp_path / "a.jsonl.gz").write_bytes(data[: len(data) // 2])
    found = check_file(str(tmp_path / "a.jsonl.gz"), "json")
    decoded = zlib.decompressobj(31).decompress(data[: len(data) // 2])
    assert found.lines_read == decoded.count(b"\n") and 0 < found.lines_read < ROWS
    # Concatenated members (bgzip, cat a.gz b.gz) are one file read whole.
    (tmp_path / "m.jsonl.gz").write_bytes(
        gzip.compress(text) + gzip.compress(json_lines(ROWS, ROWS + 5))
    )
    assert check_file(str(tmp_path / "m.jsonl.gz"), "json").lines_read == ROWS + 5
    (tmp_path / "m.jsonl.bz2").write_bytes(bz2.compress(text) + bz2.compress(b"{}\n"))
    assert check_file(str(tmp_path / "m.jsonl.bz2"), "json").lines_read == ROWS + 1
    (tmp_path / "empty.jsonl.gz").write_bytes(b"")
    assert check_file(str(tmp_path / "empty.jsonl.gz"), "json").reason == TRUNCATED


def test_damaged_compressed_data_is_placed(tmp_path):
    data = bytearray(gzip.compress(bytes(range(256)) * 20000))
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "x.jsonl.gz").write_bytes(bytes(data))
    found = check_file(str(tmp_path / "x.jsonl.gz"), "json")
    assert found.reason == DAMAGED and "damaged before byte" in found.where
    assert found.stopped_at_byte is not None and found.stopped_at_byte <= len(data)


def test_plain_json_lines_cut_mid_line_and_a_whole_last_line_without_its_break(tmp_path):
    text = json_lines(0, 50)
    (tmp_path / "cut.jsonl").write_bytes(text[:-20])
    found = check_file(str(tmp_path / "cut.jsonl"), "json")
    assert found.reason == TRUNCATED and "cut mid-line" in found.where
    assert f"the end of the file at byte {len(text) - 20:,}" in found.where
    (tmp_path / "unterminated.jsonl").write_bytes(text[:-1])  # a whole object, no final break
    assert check_file(str(tmp_path / "unterminated.jsonl"), "json").reason is None
    (tmp_path / "bad_middle.jsonl").write_bytes(b'{"id": 1, "te\n' + text)  # malformed, not cut
    assert check_file(str(tmp_path / "bad_middle.jsonl"), "json").reason is None
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert check_file(str(tmp_path / "empty.jsonl"), "json").reason is None


def test_csv_cut_short_or_inside_a_quoted_value(tmp_path):
    text = csv_text(0, 30)
    (tmp_path / "whole.csv").write_bytes(text)
    assert check_file(str(tmp_path / "whole.csv"), "csv").reason is None
    (tmp_path / "no_break.csv").write_bytes(text[:-1])
    assert "without a line break" in check_file(str(tmp_path / "no_break.csv"), "csv").where
    inside = text[: text.rindex(b"\nand a line break") + 1]  # cut just after a quoted break
    (tmp_path / "inside.csv.gz").write_bytes(gzip.compress(inside))
    found = check_file(str(tmp_path / "inside.csv.gz"), "csv")
    assert found.reason == TRUNCATED and "inside a quoted value" in found.where


def test_codecs_and_spark_error_text():
    assert [codec_of(n) for n in ("a.jsonl.gz", "a.csv.BZ2", "a.jsonl.zst", "a.jsonl")] == [
        "gzip",
        "bz2",
        "zstd",
        None,
    ]
    py4j = (
        "An error occurred while calling o61.load.\n: org.apache.spark.SparkException: "
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///d/x.jsonl.gz.  "
        "SQLSTATE: KD001\n\tat org.apache.spark.Foo(Foo.scala:1)\nCaused by: "
        "java.io.EOFException: Unexpected end of input stream\n\tat x.y(Z.java:2)\n"
    )
    said = spark_error_text(Exception(py4j))
    assert (
        said == "error reading file:///d/x.jsonl.gz: EOFException: Unexpected end of input stream"
    )
    assert spark_error_text(Exception("An error occurred while calling o6.x.\n: boom")) == "boom"


# -- read_corpus: the rows of the whole files, none of the others ------------------------------


def corpus_with(tmp_path: Path, name: str, data: bytes, good: bytes, good_name: str) -> Path:
    root = tmp_path / "in"
    root.mkdir()
    (root / good_name).write_bytes(good)
    (root / name).write_bytes(data)
    return root


def cut_cases() -> dict[str, tuple[str, bytes, str, str]]:
    """case -> (bad file's name, its bytes, its format's name in messages, where it stopped)."""
    text = json_lines(ROWS, 2 * ROWS)
    gz, bz = gzip.compress(text), bz2.compress(text)
    return {
        "gzip": ("bad.jsonl.gz", gz[: len(gz) * 6 // 10], "JSON lines, gzip", "stops at byte"),
        "bzip2 tail": ("bad.jsonl.bz2", bz[:-4], "JSON lines, bz2", "stops at byte"),
        "bzip2": ("bad.jsonl.bz2", bz[: len(bz) // 2], "JSON lines, bz2", "stops at byte"),
        "mid-line": ("bad.jsonl", text[:-30], "JSON lines", "cut mid-line"),
    }


@pytest.mark.parametrize("case", sorted(cut_cases()))
def test_a_cut_file_is_refused_or_skipped_whole(spark, tmp_path, case, caplog):
    name, data, kind, where = cut_cases()[case]
    root = corpus_with(tmp_path, name, data, gzip.compress(json_lines(0, 100)), "good.jsonl.gz")
    with pytest.raises(UserError) as refused:
        read_corpus(spark, str(root))
    message = str(refused.value)
    assert f"{name} ({kind}): " in message and where in message and "--skip-corrupt" in message
    assert "\n" not in message and "o6" not in message and "py4j" not in message.lower()
    df, skipped = read_corpus(spark, str(root), skip_corrupt=True)
    assert sorted(r["id"] for r in df.collect()) == sorted(f"d{i}" for i in range(100))
    assert [(Path(s["path"]).name, s["reason"], s["format"]) for s in skipped] == [
        (name, TRUNCATED, "json")
    ]
    assert skipped[0]["stopped_at_byte"] == len(data) and where in skipped[0]["error"]
    assert any(
        "skipping a whole input file" in r.message and name in r.message for r in caplog.records
    )


def test_zstd_cut_short_is_refused_or_skipped_on_every_spark(spark, tmp_path):
    text = json_lines(0, 300)
    data = zstd(text)
    root = corpus_with(tmp_path, "bad.jsonl.zst", data[:-7], json_lines(900, 910), "good.jsonl")
    spark_41 = tuple(int(part) for part in spark.version.split(".")[:2]) >= (4, 1)
    if not spark_41:  # refused by name before anything is read (SPARK-52482)
        with pytest.raises(UserError, match=r"bad\.jsonl\.zst is zstd-compressed"):
            read_corpus(spark, str(root))
        return
    with pytest.raises(UserError, match=r"bad\.jsonl\.zst \(JSON lines, zstd\): the zstd stream"):
        read_corpus(spark, str(root))
    df, skipped = read_corpus(spark, str(root), skip_corrupt=True)
    assert df.count() == 10 and [s["reason"] for s in skipped] == [TRUNCATED]


def test_csv_cut_mid_record_is_refused_or_skipped_whole(spark, tmp_path):
    text = csv_text(100, 200)
    root = corpus_with(
        tmp_path, "bad.csv.gz", gzip.compress(text[:-25]), csv_text(0, 10), "good.csv"
    )
    with pytest.raises(UserError, match=r"bad\.csv\.gz \(CSV, gzip\): it ends inside"):
        read_corpus(spark, str(root))
    df, skipped = read_corpus(spark, str(root), skip_corrupt=True)
    assert sorted(r["id"] for r in df.collect()) == sorted(f"d{i}" for i in range(10))
    assert [Path(s["path"]).name for s in skipped] == ["bad.csv.gz"]


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_a_parquet_or_orc_file_cut_short_is_refused_or_skipped_whole(spark, tmp_path, fmt):
    root = tmp_path / "in"
    root.mkdir()
    write = pq.write_table if fmt == "parquet" else lambda t, p: orc.write_table(t, str(p))
    write(pa.table({"id": ["a", "b"], "text": ["one two", "three four"]}), root / f"good.{fmt}")
    write(
        pa.table({"id": [f"c{i}" for i in range(500)], "text": ["x y"] * 500}), root / f"bad.{fmt}"
    )
    data = (root / f"bad.{fmt}").read_bytes()
    (root / f"bad.{fmt}").write_bytes(data[: len(data) // 2])
    shown = {"parquet": "Parquet", "orc": "ORC"}[fmt]
    with pytest.raises(UserError) as refused:
        read_corpus(spark, str(root))
    assert f"bad.{fmt} ({shown}): no readable footer in its last bytes (the file is " in str(
        refused.value
    )
    df, skipped = read_corpus(spark, str(root), skip_corrupt=True)
    assert sorted(r["id"] for r in df.collect()) == ["a", "b"]
    assert [(Path(s["path"]).name, s["reason"]) for s in skipped] == [
        (f"bad.{fmt}", "unreadable footer")
    ]
    assert skipped[0]["stopped_at_byte"] == len(data) // 2


def test_the_session_ignoring_corrupt_files_changes_nothing(spark, tmp_path):
    """``spark.sql.files.ignoreCorruptFiles`` set on the session: Spark's readers as the run
    builds them still fail on a file they cannot read to its end, rather than keep its rows."""
    data = gzip.compress(json_lines(0, ROWS))
    root = corpus_with(tmp_path, "bad.jsonl.gz", data[: len(data) // 2], b"", "empty.jsonl")
    spark.conf.set("spark.sql.files.ignoreCorruptFiles", "true")
    try:
        assert spark.read.json(str(root)).count() > 0  # Spark's own default: the first rows
        # (Spark 4 names the error class; 3.5 gives the codec's own exception)
        with pytest.raises(Exception, match=r"FAILED_READ_FILE|Unexpected end of input stream"):
            format_reader(spark, "json").load(str(root)).count()
    finally:
        spark.conf.unset("spark.sql.files.ignoreCorruptFiles")


def test_the_driver_reader_leaves_out_what_the_run_skipped_and_refuses_the_rest(tmp_path):
    text = json_lines(0, ROWS)
    data = gzip.compress(text)
    root = corpus_with(
        tmp_path, "bad.jsonl.gz", data[: len(data) // 2], json_lines(0, 7), "good.jsonl"
    )
    with pytest.raises(
        UserError, match=r"bad\.jsonl\.gz \(JSON lines, gzip\): the gzip stream stops"
    ):
        read_table(str(root), "corpus", corpus=True)
    report = {"skipped_files": [{"path": f"file:{root}/bad.jsonl.gz", "reason": TRUNCATED}]}
    table = read_table(str(root), "corpus", corpus=True, skipped=skipped_paths(report))
    assert table.num_rows == 7


def test_spark_tasks_check_files_as_this_process_does(spark, tmp_path):
    """The path files on other file systems take (Spark tasks opening them with PyArrow's file
    systems), on local files: the same checks as threads here."""
    data = gzip.compress(json_lines(0, ROWS))
    (tmp_path / "whole.jsonl.gz").write_bytes(data)
    (tmp_path / "cut.jsonl.gz").write_bytes(data[:-100])
    (tmp_path / "cut.jsonl").write_bytes(json_lines(0, 10)[:-5])
    (tmp_path / "whole.jsonl").write_bytes(json_lines(0, 10))
    files = [f"file:{tmp_path}/{name}" for name in sorted(p.name for p in tmp_path.iterdir())]
    assert check_in_tasks(spark, files, "json") == check_files_here(files, "json")
    assert [c.reason for c in check_files_here(files, "json")] == [TRUNCATED, TRUNCATED, None, None]
