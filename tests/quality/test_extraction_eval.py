"""Measuring the ingest's choices: token scores, extractor scoring, WARC reader timing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.quality.extraction_eval import (
    SHARED_ENV,
    evaluate_extractor,
    extractors,
    read_benchmark,
    shared_data_dir,
    token_scores,
    tokens,
    versions,
    warc_read_speed,
)

HTML = (
    "<html><head><title>t</title></head><body><nav>Home | News | Sport</nav>"
    "<article><h1>River walks</h1><p>The river runs past the old mill and under three "
    "bridges before it reaches the sea at the harbour town.</p></article>"
    "<footer>Copyright 2024</footer></body></html>"
)


def warc_record(uri: str, html: str) -> bytes:
    body = f"<html><body><p>{html}</p></body></html>".encode()
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
    head = (
        "WARC/1.0\r\nWARC-Type: response\r\n"
        f"WARC-Record-ID: <urn:uuid:{abs(hash(uri)):032x}>\r\n"
        f"WARC-Target-URI: {uri}\r\nWARC-Date: 2020-01-01T00:00:00Z\r\n"
        "Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(http)}\r\n\r\n"
    )
    return head.encode() + http + b"\r\n\r\n"


def test_tokens_are_lowercase_words():
    assert tokens("The cat, the CAT!") == {"the": 2, "cat": 2}
    assert tokens(None) == {}


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("a b c", "a b c", (1.0, 1.0, 1.0)),
        ("a b", "a b c d", (1.0, 0.5, 2 / 3)),
        ("a a x y", "a b", (0.25, 0.5, 1 / 3)),  # multisets: one "a" matches
        ("", "a", (0.0, 0.0, 0.0)),
        ("", "", (1.0, 1.0, 1.0)),
        ("a", "", (0.0, 1.0, 0.0)),
    ],
)
def test_token_scores(predicted, gold, expected):
    assert token_scores(predicted, gold) == pytest.approx(expected)


def test_evaluate_extractor_averages_pages():
    pages = [("a b c", "a b c"), ("a b", "a b c d")]
    result = evaluate_extractor(lambda html: html, pages, repeats=2)
    assert result["pages"] == 2
    assert result["precision"] == 1.0
    assert result["recall"] == 0.75
    assert result["f1"] == round((1.0 + 2 / 3) / 2, 4)
    assert result["empty_outputs"] == 0 and result["pages_per_second"] > 0
    assert evaluate_extractor(lambda html: " ", pages)["empty_outputs"] == 2


def test_the_ingest_extractors_find_the_article():
    found = extractors()
    main = found["resiliparse main (--extract main)"](HTML)
    text = found["resiliparse text (--extract text)"](HTML)
    assert "river runs past the old mill" in main and "river runs past the old mill" in text
    assert "Copyright" not in main


def test_read_benchmark_pairs_html_with_the_gold_body(tmp_path):
    path = tmp_path / "bench.parquet"
    pq.write_table(pa.table({"html": ["<p>x</p>"], "article_body": ["x"], "url": ["u"]}), path)
    assert read_benchmark(path) == [("<p>x</p>", "x")]


def test_warc_read_speed_counts_every_record(tmp_path):
    path = tmp_path / "a.warc"
    path.write_bytes(
        b"".join(warc_record(f"http://example.com/{i}", f"page {i}") for i in range(5))
    )
    results = warc_read_speed([path, path], repeats=1)
    assert results["fastwarc"]["records"] == 10
    assert all(r["records"] == 10 for r in results.values())  # warcio too, when installed
    assert results["fastwarc"]["records_per_second"] > 0


def test_versions_and_shared_data_dir(monkeypatch, tmp_path):
    assert "fastwarc" in versions() and "resiliparse" in versions()
    monkeypatch.setenv(SHARED_ENV, str(tmp_path))
    assert shared_data_dir() == Path(tmp_path)
    monkeypatch.delenv(SHARED_ENV)
    assert shared_data_dir().parts[-2:] == ("shared", "data")
