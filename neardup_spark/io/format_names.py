"""The input formats a corpus may have, and the format a file's name says: plain rules on names,
shared by the Spark reader (:mod:`.formats`), the driver-side corpus reader of ``explain``,
``evaluate`` and the report (:mod:`.finished`) and the command line's ``--input-format``."""

from __future__ import annotations

INPUT_FORMATS = ("parquet", "json", "orc", "csv")
# Each format as messages name it.
FORMAT_NAMES = {"parquet": "Parquet", "json": "JSON lines", "csv": "CSV", "orc": "ORC"}
# Name endings of compressed files, removed before the format's own ending is looked at.
COMPRESSION_SUFFIXES = (
    ".gz",
    ".gzip",
    ".bz2",
    ".zst",
    ".zstd",
    ".deflate",
    ".lz4",
    ".snappy",
    ".xz",
)
FORMAT_SUFFIXES = {
    ".parquet": "parquet",
    ".parq": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".orc": "orc",
    ".csv": "csv",
}


def format_of(name: str) -> str | None:
    """The format a file name says (``None`` if it says none).

    >>> format_of("crawl/part-00000-1f.c000.snappy.parquet"), format_of("shard_0001.jsonl.zst")
    ('parquet', 'json')
    >>> format_of("part-00000") is None
    True
    """
    base = name.rsplit("/", 1)[-1].lower()
    stripped = True
    while stripped:
        stripped = False
        for suffix in COMPRESSION_SUFFIXES:
            if base.endswith(suffix) and len(base) > len(suffix):
                base, stripped = base[: -len(suffix)], True
    for suffix, fmt in FORMAT_SUFFIXES.items():
        if base.endswith(suffix):
            return fmt
    return None
