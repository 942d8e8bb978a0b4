"""Small WARC files written with warcio (an independent implementation of the format, so the
FastWARC reader is not only tested on files of its own making), shared by the ingest tests."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

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


@pytest.fixture(scope="session")
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
