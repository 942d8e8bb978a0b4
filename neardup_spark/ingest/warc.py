"""WARC and WET files -> the Parquet corpus that ``neardup dedupe`` reads with its defaults.

``neardup ingest WARC_PATHS... OUTPUT`` (or ``spark-submit jobs/ingest_warc.py``) writes::

    OUTPUT/corpus/       Parquet, one row per document: the dedupe job's input
    OUTPUT/skipped/      Parquet, one row per record that is not a document, with the reason
    OUTPUT/summary.json  counts: records by type, documents, skipped by reason, charsets, ...
    OUTPUT/_SUCCESS      written last

then ``neardup dedupe OUTPUT/corpus DEDUPED``.

Corpus columns: ``id`` (the WARC-Record-ID, e.g. ``<urn:uuid:...>``), ``url``
(WARC-Target-URI), ``fetch_date`` (WARC-Date, UTC timestamp), ``record_type``,
``content_type`` (the HTTP Content-Type without parameters), ``charset`` (the one the payload was
decoded with), ``http_status``, ``text`` (extracted), ``raw_bytes`` (payload bytes after HTTP
content decoding), ``text_bytes`` (UTF-8 bytes of ``text``), ``replaced_chars`` (undecodable
bytes replaced by U+FFFD), ``source_file``.

How files are read
    The driver lists the inputs (a file, a directory searched recursively for ``*.warc*`` and
    ``*.wet*`` names, or a glob) with :mod:`pyarrow.fs`; the list becomes a DataFrame of one
    file per partition (largest files scheduled first) and ``mapInArrow`` opens each file on an
    executor, parses it with FastWARC (gzip, zstd, lz4 or plain, detected from the bytes) and
    yields Arrow batches of records: no per-row Python UDF. Reading WARCs does not go through
    Hadoop: local paths (on a file system every executor sees) are opened natively by FastWARC;
    ``s3://`` (``s3a://`` is accepted as an alias), ``gs://`` and ``hdfs://`` URIs through
    pyarrow's file systems, with their usual credentials (environment, instance profile).
    The output is written by Spark, so it may be any path Spark writes.

What is a document (everything else is counted and listed in ``skipped/``)
    A ``response`` (or ``resource``) record whose content type is HTML (by default), or a WET
    ``conversion`` record (its text is already extracted). Reasons to skip: ``record_type``
    (request, metadata, warcinfo, revisit, ...), ``content_type`` (images, PDF, ...),
    ``empty_payload``, ``binary_payload`` (bytes that are not text whatever the header says),
    ``too_large``, ``no_record_id``, ``duplicate_id`` (the first record in file order is kept),
    ``record_error`` (the record could not be processed) and ``file_error`` (a file that cannot
    be opened or stops parsing: its records up to that point are kept). None of them fails the
    job.

Text
    The payload's HTTP ``Content-Encoding`` (gzip, deflate, br) and chunked transfer coding are
    undone leniently (old crawls often store decoded bodies under the original headers). The
    charset comes from a byte-order mark, else the HTTP header, else a ``<meta>`` declaration,
    else UTF-8 if the bytes are valid UTF-8, else Resiliparse's detector; labels are mapped as
    browsers do (WHATWG: ``iso-8859-1`` is windows-1252, ``gb2312`` is GBK). Undecodable bytes
    become U+FFFD and are counted. ``--extract main`` keeps the main content (Resiliparse's
    ``extract_plain_text(main_content=True)``, without image alt texts and comment sections);
    ``--extract text`` all visible text.
"""

from __future__ import annotations

import codecs
import fnmatch
import functools
import logging
import os
import re
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs

from neardup_spark.errors import UserError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from neardup_spark.io.output import OutputDir

log = logging.getLogger(__name__)

EXTRACT_MODES = ("main", "text")
RECORD_TYPES = ("response", "resource", "conversion")
DEFAULT_RECORD_TYPES = ("response", "conversion")
HTML_TYPES = ("text/html", "application/xhtml+xml")
DEFAULT_MAX_PAYLOAD_BYTES = 16 << 20
# A batch is handed to Spark at this many rows or this much text, whichever comes first.
DEFAULT_BATCH_ROWS = 2000
BATCH_TEXT_BYTES = 32 << 20
# WARC and HTTP header blocks up to this size (FastWARC's default 32 KiB stops at huge cookies).
MAX_HEADER_BYTES = 1 << 20

CORPUS_DIR = "corpus"
SKIPPED_DIR = "skipped"
SUMMARY_FILE = "summary.json"
INGEST_ENTRIES = frozenset({CORPUS_DIR, SKIPPED_DIR, SUMMARY_FILE, "_SUCCESS"})

# Skip reasons, in the order the summary lists them.
RECORD_TYPE = "record_type"
CONTENT_TYPE = "content_type"
EMPTY_PAYLOAD = "empty_payload"
BINARY_PAYLOAD = "binary_payload"
TOO_LARGE = "too_large"
NO_RECORD_ID = "no_record_id"
DUPLICATE_ID = "duplicate_id"
RECORD_ERROR = "record_error"
FILE_ERROR = "file_error"
SKIP_REASONS = (
    RECORD_TYPE,
    CONTENT_TYPE,
    EMPTY_PAYLOAD,
    BINARY_PAYLOAD,
    TOO_LARGE,
    NO_RECORD_ID,
    DUPLICATE_ID,
    RECORD_ERROR,
    FILE_ERROR,
)

# Names a directory listing picks up: x.warc, x.warc.gz, x.warc.wet.gz, x.wet.zst, ...
WARC_NAME = re.compile(r"\.(warc|wet)(\.[a-z0-9]+)?$", re.IGNORECASE)
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_GLOB_CHARS = frozenset("*?[")
_META_CHARSET = re.compile(
    rb"""<meta[^>]{0,512}?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:+-]{1,40})""", re.IGNORECASE
)
_HTML_SNIFF = re.compile(rb"<\s*(!doctype\s+html|html|head|body|title)\b", re.IGNORECASE)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
SNIFF_BYTES = 4096

# The record table mapInArrow yields: the corpus columns plus bookkeeping.
RECORD_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("url", pa.string()),
        pa.field("fetch_date", pa.timestamp("us", tz="UTC")),
        pa.field("record_type", pa.string()),
        pa.field("content_type", pa.string()),
        pa.field("charset", pa.string()),
        pa.field("http_status", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("raw_bytes", pa.int64()),
        pa.field("text_bytes", pa.int64()),
        pa.field("replaced_chars", pa.int32()),
        pa.field("source_file", pa.string()),
        pa.field("file_index", pa.int32()),
        pa.field("record_index", pa.int64()),
        pa.field("skip_reason", pa.string()),
        pa.field("detail", pa.string()),
    ]
)
CORPUS_COLUMNS = (
    "id",
    "url",
    "fetch_date",
    "record_type",
    "content_type",
    "charset",
    "http_status",
    "text",
    "raw_bytes",
    "text_bytes",
    "replaced_chars",
    "source_file",
)
SKIPPED_COLUMNS = (
    "id",
    "url",
    "fetch_date",
    "record_type",
    "content_type",
    "http_status",
    "raw_bytes",
    "skip_reason",
    "detail",
    "source_file",
)


# --------------------------------------------------------------------------------------------
# Options and file listing (driver)


@dataclass(frozen=True)
class IngestOptions:
    """What the executors need to turn one file into records (plain, picklable values)."""

    extract: str = "main"
    record_types: tuple[str, ...] = DEFAULT_RECORD_TYPES
    content_types: tuple[str, ...] = HTML_TYPES
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    batch_rows: int = DEFAULT_BATCH_ROWS

    def validate(self) -> None:
        if self.extract not in EXTRACT_MODES:
            raise UserError(f"--extract must be one of {', '.join(EXTRACT_MODES)}")
        bad = sorted(set(self.record_types) - set(RECORD_TYPES))
        if bad or not self.record_types:
            raise UserError(
                f"--record-types takes one or more of {', '.join(RECORD_TYPES)}; "
                f"got {', '.join(self.record_types) or 'nothing'}"
            )
        if not self.content_types or any("/" not in t for t in self.content_types):
            raise UserError("--content-types takes MIME types such as text/html,text/plain")
        if self.max_payload_bytes < 1 or self.batch_rows < 1:
            raise UserError("max_payload_bytes and batch_rows must be positive")


@dataclass(frozen=True)
class WarcFile:
    """One input file: ``path`` as an executor opens it (local path or URI) and its size."""

    path: str
    size: int


def _filesystem(path: str) -> tuple[pafs.FileSystem, str, str]:
    """(file system, path inside it, prefix that turns such a path back into a URI)."""
    match = _SCHEME.match(path)
    scheme = match.group(1).lower() if match else ""
    if scheme in ("", "file"):
        local = path[len("file://") :] if scheme else path
        return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(local)), ""
    if scheme in ("s3a", "s3n"):  # Hadoop's names for S3
        path = "s3" + path[len(scheme) :]
    try:
        fs, inner = pafs.FileSystem.from_uri(path)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise UserError(f"cannot open {path}: {exc}") from None
    start = path.find(inner, path.index("://") + 3) if inner else -1
    prefix = path[:start] if start >= 0 else path.split("://", 1)[0] + "://"
    return fs, inner, prefix


def _query(path: str) -> str:
    """The ``?key=value`` options of a URI (e.g. ``?region=``), to keep on listed files."""
    return "?" + path.split("?", 1)[1] if _SCHEME.match(path) and "?" in path else ""


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def list_warc_files(paths: Sequence[str]) -> list[WarcFile]:
    """Expand files, directories (recursive; ``*.warc*``/``*.wet*`` names, no hidden entries)
    and globs, in the order given (each directory sorted); a path given twice counts once.

    Raises :class:`UserError` for a path that does not exist or matches nothing.
    """
    found: list[WarcFile] = []
    seen: set[str] = set()
    for given in paths:
        fs, inner, prefix = _filesystem(given)
        entries: list[pafs.FileInfo]
        if _GLOB_CHARS & set(inner):
            parts = inner.split("/")
            first = next(i for i, part in enumerate(parts) if _GLOB_CHARS & set(part))
            base = "/".join(parts[:first]) or "/"
            try:
                listed = fs.get_file_info(pafs.FileSelector(base, recursive=True))
            except (FileNotFoundError, OSError):
                listed = []
            entries = [e for e in listed if e.is_file and fnmatch.fnmatchcase(e.path, inner)]
        else:
            info = fs.get_file_info(inner)
            if info.type == pafs.FileType.NotFound:
                raise UserError(f"input not found: {given}")
            if info.type == pafs.FileType.Directory:
                listed = fs.get_file_info(pafs.FileSelector(inner, recursive=True))
                entries = [
                    e
                    for e in listed
                    if e.is_file
                    and WARC_NAME.search(e.base_name)
                    and not _hidden(e.path[len(inner) :])
                ]
            else:
                entries = [info]
        if not entries:
            raise UserError(f"no WARC or WET files (*.warc*, *.wet*) found in {given}")
        for entry in sorted(entries, key=lambda e: e.path):
            uri = prefix + entry.path + (_query(given) if prefix else "")
            if uri not in seen:
                seen.add(uri)
                found.append(WarcFile(uri, int(entry.size or 0)))
    return found


# --------------------------------------------------------------------------------------------
# Payload decoding and text extraction (pure functions, run on the executors)


class _ReplacementCounter:
    """A codec error handler that replaces undecodable bytes with U+FFFD and counts them."""

    name = "neardup-count-replace"

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, exc: UnicodeError) -> tuple[str, int]:
        if not isinstance(exc, UnicodeDecodeError):
            raise exc
        self.count += 1
        return "\ufffd", exc.end


_COUNTER = _ReplacementCounter()
codecs.register_error(_ReplacementCounter.name, _COUNTER)


@dataclass(frozen=True)
class Decoded:
    text: str
    charset: str
    replaced: int


@functools.lru_cache(maxsize=512)
def python_codec(label: str | None) -> str | None:
    """A charset label (HTTP or meta) -> a Python codec name, mapped as browsers map it."""
    if not label:
        return None
    from resiliparse.parse.encoding import map_encoding_to_html5

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
        before = _COUNTER.count
        text = data.decode(codec, errors=_ReplacementCounter.name)
        return Decoded(text, codec, _COUNTER.count - before)


def choose_charset(data: bytes, header_charset: str | None) -> tuple[str, bytes]:
    """(codec, bytes without a BOM): BOM, else HTTP header, else ``<meta>``, else UTF-8 if
    valid, else Resiliparse's detector, else windows-1252."""
    for bom, bom_codec in _BOMS:
        if data.startswith(bom):
            return bom_codec, data[len(bom) :]
    declared = python_codec(header_charset)
    if declared:
        return declared, data
    meta = _META_CHARSET.search(data, 0, SNIFF_BYTES * 4)
    from_meta = python_codec(meta.group(1).decode("ascii", "replace")) if meta else None
    if from_meta:
        # A <meta> read as ASCII cannot declare UTF-16/32 (WHATWG says: use UTF-8).
        return ("utf-8" if from_meta.startswith(("utf-16", "utf-32")) else from_meta), data
    try:
        data.decode("utf-8")
        return "utf-8", data
    except UnicodeDecodeError:
        pass
    from resiliparse.parse.encoding import detect_encoding

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
    if any(head.startswith(bom) for bom, codec in _BOMS if codec != "utf-8"):
        return False
    if b"\x00" in head:
        return True
    from resiliparse.parse.encoding import detect_mime

    mime = detect_mime(head)
    textual = mime.startswith("text/") or any(s in mime for s in ("xml", "html", "json"))
    return not textual and mime != "application/octet-stream"


def _dechunk(data: bytes) -> bytes | None:
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


def undo_content_encoding(
    data: bytes, content_encoding: str | None, transfer_encoding: str | None, limit: int
) -> tuple[bytes, bool]:
    """Undo chunked transfer coding and gzip/deflate/br content coding, leniently: a body
    that is not actually encoded as its headers say (common in old crawls) is returned as is.
    Returns the bytes (at most ``limit`` after decompression) and whether any decoding failed.
    """
    failed = False
    if transfer_encoding and "chunked" in transfer_encoding.lower():
        dechunked = _dechunk(data)
        if dechunked is not None:
            data = dechunked
    encoding = (content_encoding or "").lower()
    try:
        if data[:2] == b"\x1f\x8b":  # gzip, whether or not a header says so
            data = zlib.decompressobj(wbits=47).decompress(data, limit)
        elif "deflate" in encoding:
            try:
                data = zlib.decompressobj(wbits=15).decompress(data, limit)
            except zlib.error:
                data = zlib.decompressobj(wbits=-15).decompress(data, limit)
        elif encoding == "br" or encoding.endswith(",br") or encoding.endswith(", br"):
            import brotli  # a FastWARC dependency

            data = brotli.decompress(data)[:limit]
    except Exception:
        failed = True
    return data, failed


def extract_text(html: str, mode: str) -> str:
    """Visible text of an HTML document: main content (``"main"``) or all of it (``"text"``)."""
    from resiliparse.extract.html2text import extract_plain_text

    if mode == "main":
        return extract_plain_text(html, main_content=True, alt_texts=False, comments=False)
    return extract_plain_text(html, main_content=False, alt_texts=False)


# --------------------------------------------------------------------------------------------
# Records of one file (executors)


class _Rows:
    """Column lists of :data:`RECORD_SCHEMA`, flushed as Arrow record batches."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {}
        self.text_bytes = 0
        self._reset()

    def _reset(self) -> None:
        self.columns = {f.name: [] for f in RECORD_SCHEMA}
        self.text_bytes = 0

    def __len__(self) -> int:
        return len(self.columns["id"])

    def add(self, row: dict[str, Any]) -> None:
        for name, values in self.columns.items():
            values.append(row.get(name))
        self.text_bytes += row.get("text_bytes") or 0

    def flush(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_arrays(
            [pa.array(self.columns[f.name], f.type) for f in RECORD_SCHEMA], schema=RECORD_SCHEMA
        )
        self._reset()
        return batch


def _mime(content_type: str | None) -> str | None:
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


def _type_name(record: Any) -> str | None:
    try:
        return str(record.record_type)
    except Exception:
        return None


def _record_row(record: Any, options: IngestOptions) -> dict[str, Any]:
    """One FastWARC record -> a row of :data:`RECORD_SCHEMA` (without the file columns)."""
    from fastwarc.warc import WarcRecordType

    kind = _type_name(record)
    headers = record.headers
    url = headers.get("WARC-Target-URI")
    row: dict[str, Any] = {
        "id": record.record_id,
        "url": url.strip().strip("<>") if url else None,
        "record_type": kind,
    }
    try:
        row["fetch_date"] = record.record_date
    except Exception:  # a malformed WARC-Date
        row["fetch_date"] = None
    is_http = bool(record.is_http)
    if is_http:
        row["http_status"] = record.http_headers.status_code
        row["content_type"] = _mime(record.http_content_type)
    else:
        row["content_type"] = _mime(headers.get("Content-Type"))
    if kind not in options.record_types:
        row["skip_reason"] = RECORD_TYPE
        return row
    if not row["id"]:
        row["skip_reason"] = NO_RECORD_ID
        return row
    if record.content_length > options.max_payload_bytes:
        row["skip_reason"] = TOO_LARGE
        row["raw_bytes"] = int(record.content_length)
        return row
    data = record.reader.read()
    if is_http:
        data, failed = undo_content_encoding(
            data,
            record.http_headers.get("Content-Encoding"),
            record.http_headers.get("Transfer-Encoding"),
            options.max_payload_bytes,
        )
        if failed:
            row["detail"] = "content decoding failed; the body is used as stored"
    row["raw_bytes"] = len(data)
    if not data.strip():
        row["skip_reason"] = EMPTY_PAYLOAD
        return row
    is_conversion = record.record_type == WarcRecordType.conversion
    mime = row["content_type"]
    if mime is None and not is_conversion and _HTML_SNIFF.search(data, 0, SNIFF_BYTES):
        mime = row["content_type"] = "text/html"  # no Content-Type header: sniffed
    if is_conversion:
        wanted = mime is None or mime.startswith("text/")
    else:
        wanted = mime in options.content_types
    if not wanted:
        row["skip_reason"] = CONTENT_TYPE
        return row
    if looks_binary(data):
        row["skip_reason"] = BINARY_PAYLOAD
        return row
    if is_conversion:  # WET: the text is the payload, UTF-8 by definition
        decoded = decode_with(data, "utf-8")
        text = decoded.text
    else:
        decoded = decode_text(data, record.http_charset if is_http else None)
        html_like = mime in HTML_TYPES or (mime or "").endswith(("html", "+xml"))
        text = extract_text(decoded.text, options.extract) if html_like else decoded.text
    row["charset"] = decoded.charset
    row["replaced_chars"] = decoded.replaced
    row["text"] = text
    row["text_bytes"] = len(text.encode("utf-8"))
    return row


class _TellingReader:
    """A pyarrow input stream as the file object FastWARC wants (it asks for ``tell``)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._pos = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read() if size is None or size < 0 else self._stream.read(size)
        self._pos += len(data)
        return bytes(data)

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        raise OSError("stream is not seekable")

    def close(self) -> None:
        self._stream.close()


def _open(path: str) -> tuple[Any, Any]:
    """(what FastWARC iterates, what to close): a local path as is, else a pyarrow stream."""
    fs, inner, _ = _filesystem(path)
    if isinstance(fs, pafs.LocalFileSystem):
        return inner, None
    stream = fs.open_input_stream(inner, compression=None, buffer_size=1 << 20)
    reader = _TellingReader(stream)
    return reader, reader


def _fatal(exc: BaseException) -> bool:
    return isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit | MemoryError)


def file_rows(path: str, file_index: int, options: IngestOptions) -> Iterator[dict[str, Any]]:
    """All records of one WARC/WET file as rows; never raises for bad input.

    A record that fails is one ``record_error`` row; a file that cannot be opened or stops
    parsing ends with one ``file_error`` row (the records before it are kept).
    """
    from fastwarc.warc import ArchiveIterator

    base = {"source_file": path, "file_index": file_index}
    index = 0
    closer = None
    try:
        source, closer = _open(path)
        records = ArchiveIterator(
            source,
            parse_http=True,
            quirks_mode=True,
            max_header_len=MAX_HEADER_BYTES,
            fsspec_args=False,
        )
        for record in records:
            try:
                row = _record_row(record, options)
            except BaseException as exc:  # pyo3's PanicException derives from BaseException
                if _fatal(exc):
                    raise
                row = {
                    "id": record.record_id,
                    "record_type": _type_name(record),
                    "skip_reason": RECORD_ERROR,
                    "detail": f"{type(exc).__name__}: {exc}"[:500],
                }
            yield {**row, **base, "record_index": index}
            index += 1
    except BaseException as exc:
        if _fatal(exc):
            raise
        log.warning("cannot read %s after %d records: %s", path, index, exc)
        yield {
            **base,
            "record_index": index,
            "skip_reason": FILE_ERROR,
            "detail": f"{type(exc).__name__}: {exc}"[:500],
        }
    finally:
        if closer is not None:
            closer.close()


def read_files(
    batches: Iterator[pa.RecordBatch], options: IngestOptions
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: batches of (file_index, path) -> batches of records."""
    rows = _Rows()
    for batch in batches:
        for file_index, path in zip(
            batch.column("file_index").to_pylist(), batch.column("path").to_pylist(), strict=True
        ):
            for row in file_rows(path, file_index, options):
                rows.add(row)
                if len(rows) >= options.batch_rows or rows.text_bytes >= BATCH_TEXT_BYTES:
                    yield rows.flush()
    if len(rows):
        yield rows.flush()


# --------------------------------------------------------------------------------------------
# The Spark job (driver)


def _prepare_output(spark: SparkSession, output: str, overwrite: bool) -> OutputDir:
    """An :class:`~neardup_spark.io.output.OutputDir` for OUTPUT: refuse a finished ingest unless
    ``overwrite``, clear an unfinished one, never delete a directory holding foreign files."""
    from neardup_spark.io.output import SUCCESS_MARKER, OutputDir

    out = OutputDir(spark, output)
    if out.exists() and not out._fs.getFileStatus(out._root).isDirectory():
        raise UserError(f"output {output} exists and is a file")
    foreign = sorted(set(out.entries()) - INGEST_ENTRIES)
    if foreign:
        raise UserError(
            f"output {output} exists and holds files this job did not write "
            f"({', '.join(foreign[:5])}); choose an empty or new directory"
        )
    if out.exists(SUCCESS_MARKER) and not overwrite:
        raise UserError(f"output {output} already holds a finished ingest; pass --overwrite")
    if out.exists():
        out.delete()
    return out


@dataclass
class _Tally:
    """The summary's counters, filled from one aggregation over the record table."""

    records_by_type: Counter[str] = field(default_factory=Counter)
    documents_by_type: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_content_types: Counter[str] = field(default_factory=Counter)
    http_status: Counter[str] = field(default_factory=Counter)
    charsets: Counter[str] = field(default_factory=Counter)
    documents: int = 0
    empty_texts: int = 0
    with_replacements: int = 0
    replaced_chars: int = 0
    raw_bytes: int = 0
    text_bytes: int = 0
    content_decoding_failed: int = 0


def _tally(records: DataFrame) -> _Tally:
    from pyspark.sql import functions as F

    groups = (
        records.groupBy(
            "record_type",
            "skip_reason",
            "content_type",
            "http_status",
            "charset",
            (F.col("replaced_chars") > 0).alias("replaced"),
            (F.col("text_bytes") == 0).alias("empty"),
            F.col("detail").startswith("content decoding failed").alias("decode_failed"),
        )
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("raw_bytes").alias("raw_bytes"),
            F.sum("text_bytes").alias("text_bytes"),
            F.sum("replaced_chars").alias("replaced_chars"),
        )
        .collect()
    )
    tally = _Tally()
    for g in groups:
        n = int(g["n"])
        if g["skip_reason"] != FILE_ERROR:
            tally.records_by_type[g["record_type"] or "unknown"] += n
        if g["skip_reason"] is not None:
            tally.skipped[g["skip_reason"]] += n
            if g["skip_reason"] == CONTENT_TYPE:
                tally.skipped_content_types[g["content_type"] or "none"] += n
            continue
        tally.documents += n
        tally.documents_by_type[g["record_type"]] += n
        status = g["http_status"]
        tally.http_status["none" if status is None else str(status)] += n
        tally.charsets[g["charset"] or "none"] += n
        tally.empty_texts += n if g["empty"] else 0
        tally.with_replacements += n if g["replaced"] else 0
        tally.replaced_chars += int(g["replaced_chars"] or 0)
        tally.raw_bytes += int(g["raw_bytes"] or 0)
        tally.text_bytes += int(g["text_bytes"] or 0)
        tally.content_decoding_failed += n if g["decode_failed"] else 0
    return tally


def _drop_duplicate_ids(records: DataFrame) -> tuple[DataFrame, int, int]:
    """Mark every document whose id an earlier document (file order, then record order)
    already has as ``duplicate_id``. Returns (records, duplicated ids, rows marked)."""
    from pyspark.sql import functions as F

    order = F.struct("file_index", "record_index")
    dups = (
        records.where(F.col("skip_reason").isNull())
        .groupBy("id")
        .agg(F.count(F.lit(1)).alias("copies"), F.min(order).alias("first"))
        .where(F.col("copies") > 1)
    )
    row = dups.agg(F.count(F.lit(1)).alias("ids"), F.sum("copies").alias("copies")).first()
    assert row is not None
    n_ids, n_copies = int(row["ids"] or 0), int(row["copies"] or 0)
    if n_ids == 0:
        return records, 0, 0
    table = F.broadcast(dups) if n_ids <= 1_000_000 else dups
    marked = records.join(table.select("id", "first"), "id", "left").withColumn(
        "skip_reason",
        F.when(
            F.col("skip_reason").isNull() & F.col("first").isNotNull() & (order != F.col("first")),
            F.lit(DUPLICATE_ID),
        ).otherwise(F.col("skip_reason")),
    )
    return marked, n_ids, n_copies - n_ids


def _top(counter: Counter[str], limit: int = 50) -> dict[str, int]:
    return dict(counter.most_common(limit))


def ingest(
    spark: SparkSession,
    paths: list[str],
    output: str,
    extract: str = "main",
    overwrite: bool = False,
    *,
    record_types: Sequence[str] = DEFAULT_RECORD_TYPES,
    content_types: Sequence[str] = HTML_TYPES,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> dict[str, Any]:
    """Read WARC/WET ``paths`` with Spark and write ``output`` (see the module docstring).

    Returns the summary (also written to ``OUTPUT/summary.json``). Raises :class:`UserError`
    for bad options, missing inputs, or an existing finished OUTPUT without ``overwrite``.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from neardup_spark import __version__

    started = time.perf_counter()
    options = IngestOptions(
        extract=extract,
        record_types=tuple(record_types),
        content_types=tuple(t.lower() for t in content_types),
        max_payload_bytes=max_payload_bytes,
        batch_rows=batch_rows,
    )
    options.validate()
    if not paths:
        raise UserError("give at least one WARC or WET path")
    if output.rstrip("/") in {p.rstrip("/") for p in paths}:
        raise UserError("the output path must differ from the input paths")
    files = list_warc_files(paths)
    out = _prepare_output(spark, output, overwrite)
    log.info("ingesting %d files (%d bytes)", len(files), sum(f.size for f in files))

    # One file per partition; the largest files first so they do not start last.
    order = sorted(range(len(files)), key=lambda i: -files[i].size)
    rdd = spark.sparkContext.parallelize([(i, files[i].path) for i in order], numSlices=len(files))
    file_df = spark.createDataFrame(rdd, "file_index int, path string")

    records = file_df.mapInArrow(
        functools.partial(read_files, options=options), from_arrow_schema(RECORD_SCHEMA)
    ).persist(StorageLevel.MEMORY_AND_DISK)
    corpus_path, skipped_path = out.child(CORPUS_DIR), out.child(SKIPPED_DIR)
    try:
        marked, dup_ids, _ = _drop_duplicate_ids(records)  # the first job: parses the files
        tally = _tally(marked)
        file_errors = []
        if tally.skipped[FILE_ERROR]:
            file_errors = [
                {"file": r["source_file"], "records_read": r["record_index"], "error": r["detail"]}
                for r in records.where(F.col("skip_reason") == FILE_ERROR)
                .select("source_file", "record_index", "detail")
                .limit(100)
                .collect()
            ]
        documents = marked.where(F.col("skip_reason").isNull()).select(*CORPUS_COLUMNS)
        documents.write.mode("overwrite").parquet(corpus_path)
        skipped = marked.where(F.col("skip_reason").isNotNull()).select(*SKIPPED_COLUMNS)
        skipped.write.mode("overwrite").parquet(skipped_path)
    finally:
        records.unpersist()

    wall = time.perf_counter() - started
    summary: dict[str, Any] = {
        "neardup_spark_version": __version__,
        "inputs": list(paths),
        "files": len(files),
        "input_bytes": sum(f.size for f in files),
        "options": {
            "extract": options.extract,
            "record_types": list(options.record_types),
            "content_types": list(options.content_types),
            "max_payload_bytes": options.max_payload_bytes,
        },
        "records": sum(tally.records_by_type.values()),
        "records_by_type": dict(sorted(tally.records_by_type.items())),
        "documents": tally.documents,
        "documents_by_type": dict(sorted(tally.documents_by_type.items())),
        "skipped": {reason: tally.skipped[reason] for reason in SKIP_REASONS},
        "skipped_content_types": _top(tally.skipped_content_types),
        "duplicate_ids": dup_ids,
        "file_errors": file_errors,
        "documents_http_status": _top(tally.http_status),
        "documents_charset": _top(tally.charsets),
        "empty_texts": tally.empty_texts,
        "decoding": {
            "documents_with_replacements": tally.with_replacements,
            "replaced_chars": tally.replaced_chars,
            "content_decoding_failed": tally.content_decoding_failed,
        },
        "payload_bytes": tally.raw_bytes,
        "text_bytes": tally.text_bytes,
        "output": {"corpus": corpus_path, "skipped": skipped_path},
        "spark": {"version": spark.version, "master": spark.sparkContext.master},
        "wall_seconds": round(wall, 3),
        "files_per_second": round(len(files) / wall, 2) if wall else None,
        "records_per_second": round(sum(tally.records_by_type.values()) / wall, 1)
        if wall
        else None,
    }
    out.write_json(SUMMARY_FILE, summary)
    out.mark_success()
    return summary


# --------------------------------------------------------------------------------------------
# Command line
