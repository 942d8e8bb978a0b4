"""What an ingest is asked to do: which records are documents, how text is extracted, how big a
payload and a batch may be. Plain, picklable values that the executors receive."""

from __future__ import annotations

from dataclasses import dataclass

from neardup_spark.errors import UserError

# --extract: the main content, or all visible text (ingest/extract.py)
EXTRACT_MODES = ("main", "text")

RECORD_TYPES = ("response", "resource", "conversion")
DEFAULT_RECORD_TYPES = ("response", "conversion")
HTML_TYPES = ("text/html", "application/xhtml+xml")
DEFAULT_MAX_PAYLOAD_BYTES = 16 << 20
# A batch is handed to Spark at this many rows or this much text, whichever comes first.
DEFAULT_BATCH_ROWS = 2000
BATCH_TEXT_BYTES = 32 << 20


@dataclass(frozen=True)
class IngestOptions:
    """What the executors need to turn one file into records (plain, picklable values)."""

    extract: str = "main"
    record_types: tuple[str, ...] = DEFAULT_RECORD_TYPES
    content_types: tuple[str, ...] = HTML_TYPES
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    batch_rows: int = DEFAULT_BATCH_ROWS

    def validate(self) -> None:
        """Raise :class:`UserError` for an option the command line would not accept."""
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
