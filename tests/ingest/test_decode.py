"""Payload bytes -> text: charsets, content and transfer codings, sniffing."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from neardup_spark.ingest.decode import (
    PayloadTooLarge,
    decode_text,
    decode_with,
    looks_binary,
    looks_like_html,
    undo_content_encoding,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06" + bytes(40)


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


def test_a_meta_cannot_declare_utf16():
    html = '<meta charset="utf-16"><p>héllo</p>'.encode()
    assert decode_text(html, None).charset == "utf-8"


def test_replacements_are_counted_per_decode():
    assert decode_with(b"a\xffb", "utf-8").replaced == 1
    assert decode_with(b"\xff\xff\xff", "utf-8").replaced == 3  # not the running total
    assert decode_with(b"fine", "utf-8").replaced == 0


def test_looks_binary():
    assert looks_binary(PNG)
    assert looks_binary(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj")
    assert not looks_binary(b"<html><body>hello</body></html>")
    assert not looks_binary("Привет мир".encode("cp1251"))
    assert not looks_binary("<html>x</html>".encode("utf-16"))


def test_looks_like_html():
    assert looks_like_html(b"\n  <!DOCTYPE html><p>x")
    assert looks_like_html(b"<HEAD><title>t</title>")
    assert not looks_like_html(b"plain text that mentions html")
    assert not looks_like_html(b" " * 5000 + b"<html>")  # only the first 4 KiB are sniffed


def test_undo_content_encoding_is_lenient():
    body = b"<html>hello</html>"
    assert undo_content_encoding(gzip.compress(body), "gzip", None, 1 << 20) == (body, False)
    assert undo_content_encoding(body, "gzip", None, 1 << 20) == (body, False)  # stored decoded
    assert undo_content_encoding(zlib.compress(body), "deflate", None, 1 << 20)[0] == body
    raw_deflate = zlib.compressobj(wbits=-15)
    raw = raw_deflate.compress(body) + raw_deflate.flush()
    assert undo_content_encoding(raw, "deflate", None, 1 << 20) == (body, False)
    assert undo_content_encoding(brotli.compress(body), "gzip, br", None, 1 << 20)[0] == body
    chunked = b"5\r\n<html\r\nd\r\n>hello</html>\r\n0\r\n\r\n"
    assert undo_content_encoding(chunked, None, "chunked", 1 << 20)[0] == body
    assert undo_content_encoding(b"not chunked", None, "chunked", 1 << 20)[0] == b"not chunked"
    assert undo_content_encoding(b"\x1f\x8bbroken", "gzip", None, 1 << 20)[1] is True


def test_undo_content_encoding_stops_at_the_limit_and_says_so():
    """A body decompressing past the limit is too large (decompression stops there), not a
    page cut at the limit; a compressed body cut off is a decoding failure, what came out kept."""
    body = b"x" * 10_000
    for coded, encoding in (
        (gzip.compress(body), "gzip"),
        (zlib.compress(body), "deflate"),
        (brotli.compress(body), "br"),
    ):
        with pytest.raises(PayloadTooLarge, match="more than 100 bytes"):
            undo_content_encoding(coded, encoding, None, 100)
        assert undo_content_encoding(coded, encoding, None, 10_000) == (body, False)
    page = b"<html>" + bytes(range(256)) * 40 + b"</html>"
    cut, failed = undo_content_encoding(gzip.compress(page)[:-200], "gzip", None, 1 << 20)
    assert failed and 0 < len(cut) < len(page) and page.startswith(cut)
