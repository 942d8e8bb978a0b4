"""WARC/WET ingest: small WARC files written with warcio (an independent implementation of the
format, so the FastWARC reader is not only tested on files of its own making), read with Spark.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from neardup_spark.errors import UserError
from neardup_spark.ingest.warc import (
    CORPUS_COLUMNS,
    IngestOptions,
    decode_text,
    file_rows,
    ingest,
    list_warc_files,
    looks_binary,
    undo_content_encoding,
)

SHARED_WARC = Path(__file__).resolve().parents[3] / "shared" / "data" / "warc"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06" + bytes(40)
ARTICLE = (
    "The harbour town rebuilt its old stone bridge after the winter floods. "
    "Engineers from three cities worked for eleven months on the arches."
)
NAV = "Home News Sport Weather Contact Subscribe"


def page(body: str, head: str = "<title>t</title>") -> str:
    return (
        f"<!doctype html><html><head>{head}</head><body>"
        f"<nav><ul><li>{'</li><li>'.join(NAV.split())}</li></ul></nav>"
        f"<main><article><h1>Bridge</h1><p>{body}</p></article></main>"
        f"<footer>Copyright 2024 Example Media. All rights reserved.</footer></body></html>"
    )


def write_warc(path: Path, records: list[dict[str, Any]], compress: bool) -> Path:
    """Write ``records`` with warcio: dicts with type, id, url, body (bytes) and, for HTTP
    records, status and headers (a list of (name, value))."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        writer = WARCWriter(handle, gzip=compress)
        for spec in records:
            kind = spec["type"]
            if kind == "warcinfo":
                writer.write_record(writer.create_warcinfo_record(path.name, {"software": "test"}))
                continue
            warc_headers = {"WARC-Date": spec.get("date", "2024-05-06T07:08:09Z")}
            if "id" in spec:
                warc_headers["WARC-Record-ID"] = f"<urn:uuid:{spec['id']}>"
            http = None
            if kind == "request":
                http = StatusAndHeaders(
                    "GET / HTTP/1.1", [("Host", "example.com")], is_http_request=True
                )
            elif kind == "response":
                http = StatusAndHeaders(
                    spec.get("status", "200 OK"), spec.get("headers", []), protocol="HTTP/1.1"
                )
            else:  # conversion (WET), resource
                warc_headers["Content-Type"] = spec.get("content_type", "text/plain")
            record = writer.create_warc_record(
                spec.get("url", "http://example.com/"),
                kind,
                payload=io.BytesIO(spec.get("body", b"")),
                http_headers=http,
                warc_headers_dict=warc_headers,
            )
            writer.write_record(record)
    return path


def html_response(rid: str, body: bytes, content_type: str = "text/html; charset=utf-8", **kw):
    headers = [("Content-Type", content_type), *kw.pop("extra_headers", [])]
    return {
        "type": "response",
        "id": rid,
        "url": f"http://example.com/{rid}",
        "body": body,
        "headers": headers,
        **kw,
    }


@pytest.fixture(scope="module")
def warc_inputs(tmp_path_factory) -> dict[str, Path]:
    """A gzip WARC file, a directory with a plain WARC, a WET file, a broken file and a
    README (not picked up from the directory)."""
    root = tmp_path_factory.mktemp("warcs")
    cyrillic = "Мост через реку восстановили после наводнения инженеры трёх городов"
    first = write_warc(
        root / "a.warc.gz",
        [
            {"type": "warcinfo"},
            html_response("utf8", page(ARTICLE + " Café, naïve, 東京.").encode("utf-8")),
            html_response(
                "latin1",
                page("Crème brûlée à la façon de grand-mère, déjà servie.").encode("latin-1"),
                "text/html; charset=ISO-8859-1",
            ),
            html_response(
                "broken",
                b"<html><body><div><p>Unclosed paragraph <b>bold <i>italic</div></span>"
                b"</p>< <<>> &amp; &bogus; tail words here <table><tr><td>cell",
            ),
            html_response("png", PNG, "image/png"),
            {"type": "request", "id": "req", "url": "http://example.com/utf8"},
            html_response("empty", b"", status="204 No Content"),
            html_response("binary", PNG + b"<html>" * 10),
            html_response(
                "meta1251",
                page(cyrillic, '<meta charset="windows-1251">').encode("cp1251"),
                "text/html",
            ),
            html_response(
                "badutf8",
                page("valid start ").encode("utf-8").replace(b"valid", b"val\xff\xfeid"),
            ),
            html_response(
                "gzipped",
                gzip.compress(page("Compressed body about the bridge.").encode()),
                extra_headers=[("Content-Encoding", "gzip")],
            ),
            html_response(
                "mislabelled",
                page("Stored decoded although the header says gzip.").encode(),
                extra_headers=[("Content-Encoding", "gzip")],
                status="404 Not Found",
            ),
        ],
        compress=True,
    )
    directory = root / "dir"
    write_warc(
        directory / "sub" / "b.warc",
        [
            html_response("utf8", page("A later copy with the same record id.").encode()),
            html_response("plain-file", page("From the uncompressed file.").encode()),
        ],
        compress=False,
    )
    write_warc(
        directory / "c.warc.wet.gz",
        [
            {"type": "warcinfo"},
            {
                "type": "conversion",
                "id": "wet1",
                "url": "http://example.com/wet",
                "body": b"Plain text of a WET conversion record.\nSecond line.",
            },
        ],
        compress=True,
    )
    (directory / "broken.warc.gz").write_bytes(b"\x1f\x8b\x08\x00garbage, not a gzip stream")
    (directory / "README.txt").write_text("not a WARC file")
    (directory / ".hidden.warc").write_text("ignored")
    return {"root": root, "first": first, "dir": directory}


def read_parquet(path: Path) -> list[dict[str, Any]]:
    return ds.dataset(str(path)).to_table().to_pylist()


# --------------------------------------------------------------------------------------------
# Pure functions


def test_decode_text_charsets():
    assert decode_text("café".encode("latin-1"), "ISO-8859-1").text == "café"
    assert decode_text("café".encode("latin-1"), "ISO-8859-1").charset == "cp1252"  # WHATWG
    meta = '<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">Привет'
    decoded = decode_text(meta.encode("koi8-r"), None)
    assert decoded.charset == "koi8-r" and "Привет" in decoded.text
    assert decode_text("naïve".encode(), None).charset == "utf-8"
    assert decode_text(b"\xef\xbb\xbfbom text", "latin-1").text == "bom text"
    bad = decode_text(b"ok \xff\xfe ok", "utf-8")
    assert bad.replaced == 2 and bad.text.count("\ufffd") == 2
    # An unknown label falls through to detection instead of failing.
    assert decode_text(b"plain ascii", "x-no-such-charset").text == "plain ascii"


def test_looks_binary():
    assert looks_binary(PNG)
    assert looks_binary(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj")
    assert not looks_binary(b"<html><body>hello</body></html>")
    assert not looks_binary("Привет мир".encode("cp1251"))
    assert not looks_binary("<html>x</html>".encode("utf-16"))


def test_undo_content_encoding_is_lenient():
    body = b"<html>hello</html>"
    assert undo_content_encoding(gzip.compress(body), "gzip", None, 1 << 20) == (body, False)
    assert undo_content_encoding(body, "gzip", None, 1 << 20) == (body, False)  # stored decoded
    assert undo_content_encoding(zlib.compress(body), "deflate", None, 1 << 20)[0] == body
    chunked = b"5\r\n<html\r\nd\r\n>hello</html>\r\n0\r\n\r\n"
    assert undo_content_encoding(chunked, None, "chunked", 1 << 20)[0] == body
    assert undo_content_encoding(b"not chunked", None, "chunked", 1 << 20)[0] == b"not chunked"
    assert undo_content_encoding(b"\x1f\x8bbroken", "gzip", None, 1 << 20)[1] is True


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


# --------------------------------------------------------------------------------------------
# The Spark job


@pytest.fixture(scope="module")
def ingested(spark, warc_inputs, tmp_path_factory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("ingest") / "out"
    summary = ingest(spark, [str(warc_inputs["first"]), str(warc_inputs["dir"])], str(out))
    return {"out": out, "summary": summary, "rows": read_parquet(out / "corpus")}


def test_ingest_writes_the_corpus_contract(ingested):
    out, rows = ingested["out"], ingested["rows"]
    assert (out / "_SUCCESS").exists() and (out / "summary.json").exists()
    schema = ds.dataset(str(out / "corpus")).schema
    assert tuple(schema.names) == CORPUS_COLUMNS
    assert str(schema.field("http_status").type) == "int32"
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(
        f"<urn:uuid:{i}>"
        for i in (
            "utf8",
            "latin1",
            "broken",
            "meta1251",
            "badutf8",
            "gzipped",
            "mislabelled",
            "plain-file",
            "wet1",
        )
    )
    for row in rows:
        assert row["text_bytes"] == len(row["text"].encode())
        assert row["raw_bytes"] > 0 and row["source_file"]
        assert row["fetch_date"] is not None


def test_ingest_texts(ingested):
    by_id = {r["id"].removeprefix("<urn:uuid:").removesuffix(">"): r for r in ingested["rows"]}
    utf8 = by_id["utf8"]
    assert "stone bridge" in utf8["text"] and "東京" in utf8["text"]
    assert "Subscribe" not in utf8["text"]  # --extract main drops the navigation
    assert utf8["url"] == "http://example.com/utf8" and utf8["http_status"] == 200
    assert utf8["content_type"] == "text/html" and utf8["charset"] == "utf-8"
    assert "a.warc.gz" in utf8["source_file"]  # the first of the two records with this id
    assert "Crème brûlée" in by_id["latin1"]["text"] and by_id["latin1"]["charset"] == "cp1252"
    assert "Мост через реку" in by_id["meta1251"]["text"]
    assert "tail words here" in by_id["broken"]["text"]
    assert by_id["badutf8"]["replaced_chars"] == 2 and "\ufffd" in by_id["badutf8"]["text"]
    assert "Compressed body" in by_id["gzipped"]["text"]
    assert "Stored decoded" in by_id["mislabelled"]["text"]
    assert by_id["mislabelled"]["http_status"] == 404
    wet = by_id["wet1"]
    assert wet["text"] == "Plain text of a WET conversion record.\nSecond line."
    assert wet["record_type"] == "conversion" and wet["http_status"] is None


def test_ingest_summary_counts_everything(ingested):
    summary = ingested["summary"]
    assert summary == json.loads((ingested["out"] / "summary.json").read_text())
    assert summary["files"] == 4
    assert summary["records_by_type"] == {
        "conversion": 1,
        "request": 1,
        "response": 12,
        "warcinfo": 2,
    }
    assert summary["records"] == 16
    assert summary["documents"] == 9 == len(ingested["rows"])
    assert summary["skipped"] == {
        "record_type": 3,
        "content_type": 1,
        "empty_payload": 1,
        "binary_payload": 1,
        "too_large": 0,
        "no_record_id": 0,
        "duplicate_id": 1,
        "record_error": 0,
        "file_error": 1,
    }
    assert summary["skipped_content_types"] == {"image/png": 1}
    assert summary["duplicate_ids"] == 1
    assert summary["file_errors"][0]["file"].endswith("broken.warc.gz")
    assert summary["decoding"]["documents_with_replacements"] == 1
    assert summary["decoding"]["replaced_chars"] == 2
    assert summary["documents_http_status"] == {"200": 7, "404": 1, "none": 1}
    # Every record is either a document or listed in skipped/ with its reason.
    skipped = read_parquet(ingested["out"] / "skipped")
    reasons = sorted(r["skip_reason"] for r in skipped)
    assert len(skipped) == 16 - 9 + 1  # + the broken file's row
    assert reasons.count("duplicate_id") == 1 and reasons.count("record_type") == 3
    dup = next(r for r in skipped if r["skip_reason"] == "duplicate_id")
    assert dup["source_file"].endswith("b.warc")


def test_extract_text_keeps_the_navigation(spark, warc_inputs, ingested, tmp_path):
    out = tmp_path / "text"
    summary = ingest(spark, [str(warc_inputs["first"])], str(out), extract="text")
    rows = {r["id"]: r for r in read_parquet(out / "corpus")}
    assert "Subscribe" in rows["<urn:uuid:utf8>"]["text"]
    assert "stone bridge" in rows["<urn:uuid:utf8>"]["text"]
    assert summary["options"]["extract"] == "text" and summary["documents"] == 7


def test_record_and_content_type_options(spark, warc_inputs, tmp_path):
    out = tmp_path / "png"
    summary = ingest(
        spark,
        [str(warc_inputs["first"])],
        str(out),
        record_types=["response"],
        content_types=["text/html", "image/png"],
    )
    # image/png is now wanted, and still skipped as binary, not decoded into garbage text
    assert summary["skipped"]["binary_payload"] == 2 and summary["skipped"]["content_type"] == 0
    with pytest.raises(UserError, match="--record-types"):
        ingest(spark, [str(warc_inputs["first"])], str(tmp_path / "x"), record_types=["request"])


def test_finished_output_is_refused_without_overwrite(spark, warc_inputs, tmp_path):
    out = tmp_path / "out"
    first = ingest(spark, [str(warc_inputs["first"])], str(out))
    with pytest.raises(UserError, match="already holds a finished ingest"):
        ingest(spark, [str(warc_inputs["first"])], str(out))
    again = ingest(spark, [str(warc_inputs["first"])], str(out), overwrite=True)
    assert again["documents"] == first["documents"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me")
    with pytest.raises(UserError, match="did not write"):
        ingest(spark, [str(warc_inputs["first"])], str(foreign), overwrite=True)
    assert (foreign / "mine.txt").exists()


def test_ingest_command_line_arguments():
    import argparse

    from neardup_spark.cli.ingest import add_ingest_options

    parser = argparse.ArgumentParser()
    add_ingest_options(parser)
    args = parser.parse_args(["a.warc.gz", "dir", "out", "--record-types", "response,resource"])
    assert args.paths == ["a.warc.gz", "dir"] and args.output == "out"
    assert args.record_types == ("response", "resource") and args.extract == "main"


# --------------------------------------------------------------------------------------------
# Real Common Crawl samples, when ../shared/data/warc is there


@pytest.mark.skipif(not SHARED_WARC.is_dir(), reason="no ../shared/data/warc")
def test_real_samples_then_dedupe(spark, tmp_path):
    from neardup_spark.config import build_config
    from neardup_spark.pipeline.dedupe import run

    out = tmp_path / "ingested"
    summary = ingest(spark, [str(SHARED_WARC)], str(out))
    assert summary["files"] == 2 and summary["skipped"]["file_error"] == 0
    assert summary["records_by_type"]["response"] == 169
    assert summary["documents"] >= 150
    assert summary["skipped_content_types"].get("application/pdf") == 6
    corpus = read_parquet(out / "corpus")
    assert len(corpus) == summary["documents"]
    assert sum(1 for r in corpus if len(r["text"].split()) >= 50) >= 100

    report = run(spark, str(out / "corpus"), str(tmp_path / "deduped"), build_config())
    clusters = read_parquet(tmp_path / "deduped" / "clusters")
    assert report["counts"]["input_rows"] == len(corpus)
    assert sorted(r["doc_id"] for r in clusters) == sorted(r["id"] for r in corpus)
    members = {r["doc_id"]: r["cluster_id"] for r in clusters}
    assert all(members[c] == c for c in members.values())  # representatives are members
    assert (tmp_path / "deduped" / "_SUCCESS").exists()


@pytest.mark.slow
def test_ingest_job_entry_point(warc_inputs, tmp_path):
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]

    def job(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(repo)}
        return subprocess.run(
            [sys.executable, str(repo / "jobs" / "ingest_warc.py"), *args],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    out = tmp_path / "out"
    missing = job(str(tmp_path / "nope.warc.gz"), str(out))
    assert missing.returncode == 2 and "input not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    args = [str(warc_inputs["first"]), str(out), "--master", "local[1]"]
    done = job(*args, "--set", "arrow_batch_size=3")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "documents         7" in done.stdout and "neardup dedupe" in done.stdout
    assert len(read_parquet(out / "corpus")) == 7
    again = job(*args)
    assert again.returncode == 2 and "already holds a finished ingest" in again.stderr
    assert "Traceback" not in again.stderr


def test_streamed_reading_matches_the_local_path(warc_inputs):
    """Remote files (s3://, gs://, hdfs://) are read through a pyarrow stream: same records."""
    import pyarrow.fs as pafs
    from fastwarc.warc import ArchiveIterator

    from neardup_spark.ingest.warc import _TellingReader

    path = str(warc_inputs["first"])
    native = [(r.record_id, r.reader.read()) for r in ArchiveIterator(path, fsspec_args=False)]
    stream = pafs.LocalFileSystem().open_input_stream(path, compression=None)
    reader = _TellingReader(stream)
    streamed = [(r.record_id, r.reader.read()) for r in ArchiveIterator(reader, fsspec_args=False)]
    reader.close()
    assert streamed == native and len(native) == 12
