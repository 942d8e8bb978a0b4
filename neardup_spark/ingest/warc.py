"""WARC and WET files: finding them (driver) and reading their records into rows (executors).

How files are read
    The driver lists the inputs (a file, a directory searched recursively for ``*.warc*`` and
    ``*.wet*`` names, or a glob) with :mod:`pyarrow.fs`; the job turns the list into one file per
    partition and ``mapInArrow`` calls :func:`read_files`, which opens each file on an executor,
    parses it with FastWARC (gzip, zstd, lz4 or plain, detected from the bytes) and yields Arrow
    batches of records: no per-row Python UDF. Reading WARCs does not go through Hadoop: local
    paths (on a file system every executor sees) are opened natively by FastWARC; ``s3://``
    (``s3a://`` is accepted as an alias), ``gs://`` and ``hdfs://`` URIs through pyarrow's file
    systems, with their usual credentials (environment, instance profile).

What is a document (everything else is a row with a skip reason, see :mod:`.schema`)
    A ``response`` (or ``resource``) record whose content type is HTML (by default), or a WET
    ``conversion`` record (its text is already extracted). Nothing here raises for bad input: a
    record that fails is a ``record_error`` row, a file that cannot be read a ``file_error`` row.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from fastwarc.warc import ArchiveIterator, WarcRecordType

from neardup_spark.errors import UserError
from neardup_spark.ingest.decode import (
    Decoded,
    PayloadTooLarge,
    decode_text,
    decode_with,
    looks_binary,
    looks_like_html,
    undo_content_encoding,
)
from neardup_spark.ingest.extract import extract_text
from neardup_spark.ingest.options import BATCH_TEXT_BYTES, HTML_TYPES, IngestOptions
from neardup_spark.ingest.schema import (
    BINARY_PAYLOAD,
    CONTENT_TYPE,
    EMPTY_PAYLOAD,
    FILE_ERROR,
    NO_RECORD_ID,
    RECORD_ERROR,
    RECORD_SCHEMA,
    RECORD_TYPE,
    TOO_LARGE,
)
from neardup_spark.io.filesystem import pyarrow_filesystem
from neardup_spark.runtime.faults import batch_faults

log = logging.getLogger(__name__)

# WARC and HTTP header blocks up to this size (FastWARC's default 32 KiB stops at huge cookies).
MAX_HEADER_BYTES = 1 << 20
# Names a directory listing picks up: x.warc, x.warc.gz, x.warc.wet.gz, x.wet.zst, ...
WARC_NAME = re.compile(r"\.(warc|wet)(\.[a-z0-9]+)?$", re.IGNORECASE)
URI_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
GLOB_CHARS = frozenset("*?[")


# --------------------------------------------------------------------------------------------
# Finding the files (driver)


@dataclass(frozen=True)
class WarcFile:
    """One input file: ``path`` as an executor opens it (local path or URI) and its size."""

    path: str
    size: int


def input_filesystem(path: str) -> tuple[pafs.FileSystem, str, str]:
    """(file system, path inside it, prefix that turns such a path back into a URI).

    Local paths and ``file://`` URIs get an empty prefix (``~`` is expanded), so a file named
    both ways is listed once. ``s3a://`` and ``s3n://`` (Hadoop's names) mean ``s3://``.
    """
    match = URI_SCHEME.match(path)
    scheme = match.group(1).lower() if match else ""
    if scheme in ("", "file"):
        fs, inner = pyarrow_filesystem(path)
        return fs, inner, ""
    if scheme in ("s3a", "s3n"):  # Hadoop's names for S3 (the listed files keep s3://)
        path = "s3" + path[len(scheme) :]
    try:
        fs, inner = pyarrow_filesystem(path)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise UserError(f"cannot open {path}: {exc}") from None
    start = path.find(inner, path.index("://") + 3) if inner else -1
    prefix = path[:start] if start >= 0 else path.split("://", 1)[0] + "://"
    return fs, inner, prefix


def _query(path: str) -> str:
    """The ``?key=value`` options of a URI (e.g. ``?region=``), to keep on listed files."""
    return "?" + path.split("?", 1)[1] if URI_SCHEME.match(path) and "?" in path else ""


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def _glob(fs: pafs.FileSystem, pattern: str) -> list[pafs.FileInfo]:
    """The files matching ``pattern``, listed from its longest directory without wildcards."""
    parts = pattern.split("/")
    first = next(i for i, part in enumerate(parts) if GLOB_CHARS & set(part))
    base = "/".join(parts[:first]) or "/"
    try:
        listed = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    except (FileNotFoundError, OSError):
        listed = []
    return [e for e in listed if e.is_file and fnmatch.fnmatchcase(e.path, pattern)]


def _warc_files_under(fs: pafs.FileSystem, directory: str) -> list[pafs.FileInfo]:
    """The WARC/WET names under ``directory`` (recursive), without hidden entries."""
    listed = fs.get_file_info(pafs.FileSelector(directory, recursive=True))
    return [
        e
        for e in listed
        if e.is_file and WARC_NAME.search(e.base_name) and not _hidden(e.path[len(directory) :])
    ]


def _entries(fs: pafs.FileSystem, inner: str, given: str) -> list[pafs.FileInfo]:
    """The files one given path names: a glob's matches, a directory's WARCs, or the file."""
    if GLOB_CHARS & set(inner):
        return _glob(fs, inner)
    info = fs.get_file_info(inner)
    if info.type == pafs.FileType.NotFound:
        raise UserError(f"input not found: {given}")
    if info.type == pafs.FileType.Directory:
        return _warc_files_under(fs, inner)
    return [info]


def list_warc_files(paths: Sequence[str]) -> list[WarcFile]:
    """Expand files, directories (recursive; ``*.warc*``/``*.wet*`` names, no hidden entries)
    and globs, in the order given (each directory sorted); a path given twice counts once.

    Raises :class:`UserError` for a path that does not exist or matches nothing.
    """
    found: list[WarcFile] = []
    seen: set[str] = set()
    for given in paths:
        fs, inner, prefix = input_filesystem(given)
        entries = _entries(fs, inner, given)
        if not entries:
            raise UserError(f"no WARC or WET files (*.warc*, *.wet*) found in {given}")
        for entry in sorted(entries, key=lambda e: e.path):
            uri = prefix + entry.path + (_query(given) if prefix else "")
            if uri not in seen:
                seen.add(uri)
                found.append(WarcFile(uri, int(entry.size or 0)))
    return found


# --------------------------------------------------------------------------------------------
# One record -> one row (executors)


def _mime(content_type: str | None) -> str | None:
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


def _type_name(record: Any) -> str | None:
    try:
        return str(record.record_type)
    except Exception:
        return None


def _header_fields(record: Any) -> dict[str, Any]:
    """The row's fields that come from the WARC and HTTP headers."""
    headers = record.headers
    url = headers.get("WARC-Target-URI")
    row: dict[str, Any] = {
        "id": record.record_id,
        "url": url.strip().strip("<>") if url else None,
        "record_type": _type_name(record),
    }
    try:
        row["fetch_date"] = record.record_date
    except Exception:  # a malformed WARC-Date
        row["fetch_date"] = None
    if record.is_http:
        row["http_status"] = record.http_headers.status_code
        row["content_type"] = _mime(record.http_content_type)
    else:
        row["content_type"] = _mime(headers.get("Content-Type"))
    return row


def _document_text(
    data: bytes, record: Any, mime: str | None, is_conversion: bool, options: IngestOptions
) -> tuple[Decoded, str]:
    """(decoded payload, text): a WET payload as is, HTML through the extractor."""
    if is_conversion:  # WET: the text is the payload, UTF-8 by definition
        decoded = decode_with(data, "utf-8")
        return decoded, decoded.text
    decoded = decode_text(data, record.http_charset if record.is_http else None)
    html_like = mime in HTML_TYPES or (mime or "").endswith(("html", "+xml"))
    return decoded, extract_text(decoded.text, options.extract) if html_like else decoded.text


def record_row(record: Any, options: IngestOptions) -> dict[str, Any]:
    """One FastWARC record -> a row of :data:`RECORD_SCHEMA` (without the file columns): a
    document, or a record with its ``skip_reason``."""
    row = _header_fields(record)
    is_http = bool(record.is_http)
    if row["record_type"] not in options.record_types:
        row["skip_reason"] = RECORD_TYPE
        return row
    if not row["id"]:
        row["skip_reason"] = NO_RECORD_ID
        return row
    if record.content_length > options.max_payload_bytes:
        row["skip_reason"] = TOO_LARGE
        row["raw_bytes"] = int(record.content_length)
        return row
    if record.headers.get("Content-Length") is None:  # FastWARC reads such a body as empty
        raise ValueError("the record has no Content-Length header: its body cannot be delimited")
    data = record.reader.read()
    if len(data) < record.content_length:  # FastWARC ends a cut-off gzip member quietly
        raise EOFError(
            f"the record is cut off: {len(data)} of its {record.content_length} bytes (the "
            "file ends inside it)"
        )
    if is_http:
        try:
            data, failed = undo_content_encoding(
                data,
                record.http_headers.get("Content-Encoding"),
                record.http_headers.get("Transfer-Encoding"),
                options.max_payload_bytes,
            )
        except PayloadTooLarge as exc:
            row["skip_reason"], row["raw_bytes"], row["detail"] = TOO_LARGE, len(data), str(exc)
            return row
        if failed:
            row["detail"] = "content decoding failed; the body is used as stored"
    row["raw_bytes"] = len(data)
    if not data.strip():
        row["skip_reason"] = EMPTY_PAYLOAD
        return row
    is_conversion = record.record_type == WarcRecordType.conversion
    mime = row["content_type"]
    if mime is None and not is_conversion and looks_like_html(data):
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
    decoded, text = _document_text(data, record, mime, is_conversion, options)
    row["charset"] = decoded.charset
    row["replaced_chars"] = decoded.replaced
    row["text"] = text
    row["text_bytes"] = len(text.encode("utf-8"))
    return row


# --------------------------------------------------------------------------------------------
# One file -> rows, files -> Arrow batches (executors)


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
    fs, inner, _ = input_filesystem(path)
    if isinstance(fs, pafs.LocalFileSystem):
        return inner, None
    stream = fs.open_input_stream(inner, compression=None, buffer_size=1 << 20)
    reader = _TellingReader(stream)
    return reader, reader


def _fatal(exc: BaseException) -> bool:
    return isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit | MemoryError)


def _error_detail(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def file_rows(path: str, file_index: int, options: IngestOptions) -> Iterator[dict[str, Any]]:
    """All records of one WARC/WET file as rows; never raises for bad input.

    A record that fails is one ``record_error`` row; a file that cannot be opened or stops
    parsing ends with one ``file_error`` row (the records before it are kept).
    """
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
                row = record_row(record, options)
            except BaseException as exc:  # pyo3's PanicException derives from BaseException
                if _fatal(exc):
                    raise
                row = {
                    "id": record.record_id,
                    "record_type": _type_name(record),
                    "skip_reason": RECORD_ERROR,
                    "detail": _error_detail(exc),
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
            "detail": _error_detail(exc),
        }
    finally:
        if closer is not None:
            closer.close()


class _RowBuffer:
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


def read_files(
    batches: Iterator[pa.RecordBatch], options: IngestOptions
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: batches of (file_index, path) -> batches of records, each
    at most ``options.batch_rows`` rows (or about :data:`BATCH_TEXT_BYTES` of text)."""
    rows = _RowBuffer()
    for batch in batches:
        batch_faults()
        for file_index, path in zip(
            batch.column("file_index").to_pylist(), batch.column("path").to_pylist(), strict=True
        ):
            for row in file_rows(path, file_index, options):
                rows.add(row)
                if len(rows) >= options.batch_rows or rows.text_bytes >= BATCH_TEXT_BYTES:
                    yield rows.flush()
    if len(rows):
        yield rows.flush()
