"""WARC/WET files: listing the inputs, and reading one file's records into rows."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from neardup_spark.errors import UserError
from neardup_spark.ingest import warc
from neardup_spark.ingest.options import IngestOptions
from neardup_spark.ingest.warc import file_rows, list_warc_files


def test_list_warc_files(warc_inputs):
    files = list_warc_files([str(warc_inputs["first"]), str(warc_inputs["dir"])])
    names = [Path(f.path).name for f in files]
    assert names == ["a.warc.gz", "broken.warc.gz", "c.warc.wet.gz", "b.warc"]
    assert all(f.size > 0 for f in files)
    globbed = list_warc_files([str(warc_inputs["dir"] / "*.gz")])
    assert [Path(f.path).name for f in globbed] == ["broken.warc.gz", "c.warc.wet.gz"]
    # a path given twice counts once; file:// works
    twice = list_warc_files([str(warc_inputs["first"]), f"file://{warc_inputs['first']}"])
    assert len(twice) == 1
    with pytest.raises(UserError, match="input not found"):
        list_warc_files([str(warc_inputs["root"] / "nope.warc")])
    with pytest.raises(UserError, match="no WARC or WET files"):
        list_warc_files([str(warc_inputs["root"] / "*.nothing")])


def test_an_unknown_scheme_is_a_user_error():
    with pytest.raises(UserError, match="cannot open nosuchscheme://bucket/"):
        list_warc_files(["nosuchscheme://bucket/a.warc"])


def test_file_rows_never_raise(warc_inputs, tmp_path):
    rows = list(file_rows(str(warc_inputs["dir"] / "broken.warc.gz"), 0, IngestOptions()))
    assert len(rows) == 1 and rows[0]["skip_reason"] == "file_error"
    # A truncated file keeps the records before the cut.
    data = warc_inputs["first"].read_bytes()
    cut = tmp_path / "cut.warc"
    cut.write_bytes(gzip.decompress(data)[: len(gzip.decompress(data)) * 2 // 3])
    rows = list(file_rows(str(cut), 3, IngestOptions()))
    assert any(r.get("text") for r in rows)
    assert all(r["file_index"] == 3 for r in rows)
    assert [r["record_index"] for r in rows] == list(range(len(rows)))


@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "plain"])
def test_a_record_the_file_ends_inside_is_a_record_error(tmp_path, compress):
    """A file cut inside a record (a transfer stopped part way): FastWARC ends a cut gzip
    member without an error and gives the bytes it got; the record is a ``record_error``
    saying so, not a document of part of its page or an empty payload."""
    from tests.ingest.conftest import html_response, page, write_warc

    rng = random.Random(5)  # words that do not compress away: a cut lands in the page
    words = ["".join(rng.choice("abcdefghij") for _ in range(7)) for _ in range(300)]
    bodies = [page(f"article {i} " + " ".join(rng.sample(words, 200))).encode() for i in range(3)]
    whole = write_warc(
        tmp_path / ("w.warc.gz" if compress else "w.warc"),
        [html_response(f"r{i}", body) for i, body in enumerate(bodies)],
        compress,
    )
    data = whole.read_bytes()
    raw = gzip.decompress(data) if compress else data
    middle = raw.index(b"article 1 ") + 200  # inside the second record's page
    if compress:  # one gzip member a record (warcio): cut the second member part way
        members, start = [], 0
        for record_end in (raw.index(b"WARC/1", 10), raw.index(b"WARC/1", raw.index(b"article 1"))):
            members.append(raw[start:record_end])
            start = record_end
        second = gzip.compress(members[1])
        cut = gzip.compress(members[0]) + second[: len(second) * 2 // 3]
    else:
        cut = raw[:middle]
    path = tmp_path / ("cut.warc.gz" if compress else "cut.warc")
    path.write_bytes(cut)
    rows = list(file_rows(str(path), 0, IngestOptions()))
    assert [r.get("skip_reason") for r in rows[:1]] == [None]  # the first record, whole
    second = next(r for r in rows if r.get("id") == "<urn:uuid:r1>")
    assert second["skip_reason"] == "record_error" and "cut off" in second["detail"], second
    assert not any(r.get("text") and "article 1 " in r["text"] for r in rows)


def test_file_rows_skip_reasons(warc_inputs):
    rows = list(file_rows(str(warc_inputs["first"]), 0, IngestOptions()))
    by_id = {r["id"]: r for r in rows if r["id"]}
    assert by_id["<urn:uuid:png>"]["skip_reason"] == "content_type"
    assert by_id["<urn:uuid:req>"]["skip_reason"] == "record_type"
    assert by_id["<urn:uuid:empty>"]["skip_reason"] == "empty_payload"
    assert by_id["<urn:uuid:binary>"]["skip_reason"] == "binary_payload"
    document = by_id["<urn:uuid:utf8>"]
    assert document.get("skip_reason") is None and "stone bridge" in document["text"]
    assert document["text_bytes"] == len(document["text"].encode())
    small = list(file_rows(str(warc_inputs["first"]), 0, IngestOptions(max_payload_bytes=100)))
    too_large = next(r for r in small if r["id"] == "<urn:uuid:utf8>")
    assert too_large["skip_reason"] == "too_large" and too_large["raw_bytes"] > 100
    assert "text" not in too_large


def test_remote_files_are_listed_and_streamed(warc_inputs, monkeypatch):
    """A URI (s3://, gs://, hdfs://) is listed with its scheme and options and read through a
    pyarrow stream, not opened as a local path: the same rows as the local file."""
    root = warc_inputs["root"]
    resolve = warc.pyarrow_filesystem

    def with_remote(path: str) -> tuple[pafs.FileSystem, str]:
        # A file system that is not a LocalFileSystem, serving the test's directory.
        if path.startswith("remote://"):
            inner = path[len("remote://") :].split("?", 1)[0]
            return pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem()), inner
        return resolve(path)

    monkeypatch.setattr(warc, "pyarrow_filesystem", with_remote)
    files = list_warc_files(["remote://a.warc.gz?region=x", "remote://dir"])
    assert [f.path for f in files] == [
        "remote://a.warc.gz?region=x",
        "remote://dir/broken.warc.gz",
        "remote://dir/c.warc.wet.gz",
        "remote://dir/sub/b.warc",
    ]
    assert files[0].size == warc_inputs["first"].stat().st_size

    def rows(path: str) -> list[dict]:
        return [
            {k: v for k, v in r.items() if k != "source_file"}
            for r in file_rows(path, 0, IngestOptions())
        ]

    streamed, native = rows(files[0].path), rows(str(warc_inputs["first"]))
    assert streamed == native and len(native) == 12
    assert not any(r.get("skip_reason") in ("file_error", "record_error") for r in streamed)


def test_a_body_that_decompresses_past_the_limit_is_too_large(tmp_path):
    """The stored (compressed) body is under the payload limit, its page is not: the record is
    ``too_large``, not a document of the page's first ``max_payload_bytes``."""
    from tests.ingest.conftest import html_response, write_warc

    page = b"<html><body><p>" + b"a page of words " * 2000 + b"</p></body></html>"
    record = html_response(
        "zipped", gzip.compress(page), extra_headers=[("Content-Encoding", "gzip")]
    )
    path = write_warc(tmp_path / "z.warc", [record], compress=False)
    (row,) = list(file_rows(str(path), 0, IngestOptions(max_payload_bytes=8_000)))
    assert row["skip_reason"] == "too_large" and "more than 8000 bytes" in row["detail"], row
    (row,) = list(file_rows(str(path), 0, IngestOptions()))
    assert row.get("skip_reason") is None and len(row["text"]) > 20_000


def test_a_record_without_content_length_is_a_record_error(tmp_path):
    """WARC requires Content-Length; without it FastWARC reads the body as empty (it was an
    ``empty_payload``, its text lost without a word) and passes over the body."""
    path = tmp_path / "nolength.warc"
    path.write_bytes(
        b"WARC/1.0\r\nWARC-Type: resource\r\nWARC-Record-ID: <urn:uuid:x1>\r\n"
        b"Content-Type: text/plain\r\n\r\nhello world body\r\n\r\n"
    )
    options = IngestOptions(record_types=("resource",))
    rows = list(file_rows(str(path), 0, options))
    (row,) = rows
    assert row["skip_reason"] == "record_error" and "no Content-Length" in row["detail"]
