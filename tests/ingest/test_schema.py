"""The record table and the tables taken from it."""

from __future__ import annotations

from neardup_spark.ingest.schema import (
    CORPUS_COLUMNS,
    RECORD_SCHEMA,
    SKIP_REASONS,
    SKIPPED_COLUMNS,
)


def test_corpus_and_skipped_columns_come_from_the_record_table():
    names = RECORD_SCHEMA.names
    assert set(CORPUS_COLUMNS) <= set(names) and set(SKIPPED_COLUMNS) <= set(names)
    assert CORPUS_COLUMNS[:2] == ("id", "url") and "text" in CORPUS_COLUMNS
    assert "text" not in SKIPPED_COLUMNS and "skip_reason" in SKIPPED_COLUMNS
    assert "skip_reason" not in CORPUS_COLUMNS and "file_index" not in CORPUS_COLUMNS


def test_skip_reasons_in_summary_order():
    assert SKIP_REASONS == (
        "record_type",
        "content_type",
        "empty_payload",
        "binary_payload",
        "too_large",
        "no_record_id",
        "duplicate_id",
        "record_error",
        "file_error",
    )
