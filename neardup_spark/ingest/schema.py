"""The record table that reading WARC files yields, the columns of the corpus (the Parquet files
at OUTPUT) and of ``_skipped/`` taken from it, and the reasons a record is not a document.

Corpus columns: ``id`` (the WARC-Record-ID, e.g. ``<urn:uuid:...>``), ``url``
(WARC-Target-URI), ``fetch_date`` (WARC-Date, UTC timestamp), ``record_type``,
``content_type`` (the HTTP Content-Type without parameters), ``charset`` (the one the payload was
decoded with), ``http_status``, ``text`` (extracted), ``raw_bytes`` (payload bytes after HTTP
content decoding), ``text_bytes`` (UTF-8 bytes of ``text``), ``replaced_chars`` (undecodable
bytes replaced by U+FFFD), ``source_file``.

Skip reasons: ``record_type`` (request, metadata, warcinfo, revisit, ...), ``content_type``
(images, PDF, ...), ``empty_payload``, ``binary_payload`` (bytes that are not text whatever the
header says), ``too_large``, ``no_record_id``, ``duplicate_id`` (the first record in file order
is kept), ``record_error`` (the record could not be processed) and ``file_error`` (a file that
cannot be opened or stops parsing: its records up to that point are kept).
"""

from __future__ import annotations

import pyarrow as pa

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
