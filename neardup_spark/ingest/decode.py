"""Payload bytes -> text: HTTP content and transfer codings, charsets, content sniffing.

Pure functions, run on the executors.

The payload's HTTP ``Content-Encoding`` (gzip, deflate, br) and chunked transfer coding are
undone leniently (old crawls often store decoded bodies under the original headers). The
charset comes from a byte-order mark, else the HTTP header, else a ``<meta>`` declaration, else
UTF-8 if the bytes are valid UTF-8, else Resiliparse's detector; labels are mapped as browsers do
(WHATWG: ``iso-8859-1`` is windows-1252, ``gb2312`` is GBK). Undecodable bytes become U+FFFD and
are counted.
"""

from __future__ import annotations

import codecs
import functools
import re
import zlib
from dataclasses import dataclass

import brotli
from resiliparse.parse.encoding import detect_encoding, detect_mime, map_encoding_to_html5

# Sniffers look at this many leading bytes.
SNIFF_BYTES = 4096

META_CHARSET = re.compile(
    rb"""<meta[^>]{0,512}?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:+-]{1,40})""", re.IGNORECASE
)
HTML_SNIFF = re.compile(rb"<\s*(!doctype\s+html|html|head|body|title)\b", re.IGNORECASE)
BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class ReplacementCounter:
    """A codec error handler that replaces undecodable bytes with U+FFFD and counts them."""

    name = "neardup-count-replace"

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, exc: UnicodeError) -> tuple[str, int]:
        if not isinstance(exc, UnicodeDecodeError):
            raise exc
        self.count += 1
        return "\ufffd", exc.end


# Registered once per process; decode_with reads the count before and after a decode.
REPLACEMENTS = ReplacementCounter()
codecs.register_error(ReplacementCounter.name, REPLACEMENTS)


@dataclass(frozen=True)
class Decoded:
    """Text decoded from bytes, the codec used and how many bytes became U+FFFD."""

    text: str
    charset: str
    replaced: int


@functools.lru_cache(maxsize=512)
def python_codec(label: str | None) -> str | None:
    """A charset label (HTTP or meta) -> a Python codec name, mapped as browsers map it."""
    if not label:
        return None
    name = map_encoding_to_html5(label.strip().strip("\"'"), fallback_utf8=False)
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_with(data: bytes, codec: str) -> Decoded:
    """Decode with ``codec``; undecodable bytes become U+FFFD and are counted."""
    try:
        return Decoded(data.decode(codec), codec, 0)
    except UnicodeDecodeError:
        before = REPLACEMENTS.count
        text = data.decode(codec, errors=ReplacementCounter.name)
        return Decoded(text, codec, REPLACEMENTS.count - before)


def choose_charset(data: bytes, header_charset: str | None) -> tuple[str, bytes]:
    """(codec, bytes without a BOM): BOM, else HTTP header, else ``<meta>``, else UTF-8 if
    valid, else Resiliparse's detector, else windows-1252."""
    for bom, bom_codec in BOMS:
        if data.startswith(bom):
            return bom_codec, data[len(bom) :]
    declared = python_codec(header_charset)
    if declared:
        return declared, data
    meta = META_CHARSET.search(data, 0, SNIFF_BYTES * 4)
    from_meta = python_codec(meta.group(1).decode("ascii", "replace")) if meta else None
    if from_meta:
        # A <meta> read as ASCII cannot declare UTF-16/32 (WHATWG says: use UTF-8).
        return ("utf-8" if from_meta.startswith(("utf-16", "utf-32")) else from_meta), data
    try:
        data.decode("utf-8")
        return "utf-8", data
    except UnicodeDecodeError:
        pass
    return python_codec(detect_encoding(data)) or "cp1252", data


def decode_text(data: bytes, header_charset: str | None) -> Decoded:
    """Payload bytes -> text, see :func:`choose_charset`."""
    codec, body = choose_charset(data, header_charset)
    return decode_with(body, codec)


def looks_binary(data: bytes) -> bool:
    """True for bytes that are not text whatever the headers say (images, PDF, archives...).

    NUL bytes in the first 4 KiB (without a UTF-16/32 byte-order mark), or a magic number that
    Resiliparse's MIME sniffer recognises as a non-text type.
    """
    head = data[:SNIFF_BYTES]
    if any(head.startswith(bom) for bom, codec in BOMS if codec != "utf-8"):
        return False
    if b"\x00" in head:
        return True
    mime = detect_mime(head)
    textual = mime.startswith("text/") or any(s in mime for s in ("xml", "html", "json"))
    return not textual and mime != "application/octet-stream"


def looks_like_html(data: bytes) -> bool:
    """True when the first 4 KiB hold an HTML tag (a payload without a Content-Type)."""
    return HTML_SNIFF.search(data, 0, SNIFF_BYTES) is not None


def dechunk(data: bytes) -> bytes | None:
    """Undo HTTP chunked transfer coding; None if ``data`` is not chunked."""
    out = bytearray()
    pos = 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            return None
        size_text = data[pos:end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return None
        if size == 0:
            return bytes(out)
        start = end + 2
        out += data[start : start + size]
        pos = start + size + 2
        if start + size > len(data):  # truncated record: keep what is there
            return bytes(out)


class PayloadTooLarge(ValueError):
    """A body that decompresses to more than the payload limit (the record is ``too_large``)."""


def _inflate(data: bytes, wbits: int, limit: int) -> tuple[bytes, bool]:
    """``data`` decompressed up to ``limit`` bytes, and whether its stream ended (False: the
    body was cut off). :class:`PayloadTooLarge` when more than ``limit`` would come out."""
    stream = zlib.decompressobj(wbits=wbits)
    out = stream.decompress(data, limit)
    if stream.unconsumed_tail:
        raise PayloadTooLarge(f"its body decompresses to more than {limit} bytes")
    return out, stream.eof


def undo_content_encoding(
    data: bytes, content_encoding: str | None, transfer_encoding: str | None, limit: int
) -> tuple[bytes, bool]:
    """Undo chunked transfer coding and gzip/deflate/br content coding, leniently: a body
    that is not actually encoded as its headers say (common in old crawls) is returned as is.
    Returns the bytes and whether any decoding failed (a compressed body cut off counts: what
    came out is kept). :class:`PayloadTooLarge` when a body decompresses to more than
    ``limit`` bytes (decompression stops there: memory stays bounded).
    """
    failed = False
    if transfer_encoding and "chunked" in transfer_encoding.lower():
        dechunked = dechunk(data)
        if dechunked is not None:
            data = dechunked
    encoding = (content_encoding or "").lower()
    try:
        if data[:2] == b"\x1f\x8b":  # gzip, whether or not a header says so
            data, ended = _inflate(data, 47, limit)
            failed = not ended
        elif "deflate" in encoding:
            try:
                data, ended = _inflate(data, 15, limit)
            except zlib.error:
                data, ended = _inflate(data, -15, limit)
            failed = not ended
        elif encoding == "br" or encoding.endswith(",br") or encoding.endswith(", br"):
            data = brotli.decompress(data)
            if len(data) > limit:
                raise PayloadTooLarge(f"its body decompresses to more than {limit} bytes")
    except PayloadTooLarge:
        raise
    except Exception:
        failed = True
    return data, failed
