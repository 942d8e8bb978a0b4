"""Filtering a Parquet corpus by a set of document ids without shuffling the corpus.

A join of the corpus with a set of ids too large to broadcast shuffles every text (a corpus of
ten million pages: ~25 GB). Instead, each document is known by its address in the input, the
file and the row in it (Spark's ``_metadata`` of a Parquet scan: no read of the texts), the set
is turned into 64-row bitmap words, one row per (file, word) holding a member, and those words
are broadcast to the scan, which keeps or drops each row by one bit test. Only the ids travel
through a shuffle; the broadcast has at most one row per 64 documents of the corpus.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark.batch.row_copies import DUPLICATES
from neardup_spark.columns import DOC_ID
from neardup_spark.stages.names import column

FILE_PATH = "_neardup_file"
ROW_INDEX = "_neardup_row"
WORD = "_neardup_word"
BITS = "_neardup_bits"
VALUES = "_neardup_values"
WORD_ROWS = 64  # rows per bitmap word (a Spark long)
_WORD_SHIFT = 6
# PySpark 4 logs every analysis error of a DataFrame call, caught or not, as an ERROR holding
# the JVM's stack trace, on stderr (these loggers, not propagated to the root logger).
QUERY_CONTEXT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


@contextlib.contextmanager
def unlogged_analysis_errors() -> Iterator[None]:
    """PySpark's logging of analysis errors off, for a probe whose failure is an answer."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # Spark 3.5 logs none
        yield
        return
    # Made by PySpark's own getLogger: a plain Logger under these names would break its calls.
    loggers = [PySparkLogger.getLogger(name) for name in QUERY_CONTEXT_LOGGERS]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, before, strict=True):
            logger.disabled = disabled


def with_addresses(scan: DataFrame) -> DataFrame | None:
    """``scan``'s rows with their address: ``_neardup_file`` (the file's path) and
    ``_neardup_row`` (the row's index in it). None when ``scan`` is not a file scan (a
    DataFrame built in memory, a join, ...) or a scan without row indexes (CSV, JSON lines)."""
    try:
        with unlogged_analysis_errors():
            return scan.select(
                "*",
                F.col("_metadata.file_path").alias(FILE_PATH),
                F.col("_metadata.row_index").alias(ROW_INDEX),
            )
    except AnalysisException:
        return None


def address_words(addressed: DataFrame, id_col: str) -> Callable[[DataFrame], DataFrame]:
    """Document ids -> the bitmap words of their addresses, for ``df.transform``.

    Input columns: ``doc_id`` (each id once); ``addressed``: ``id_col`` and the address columns
    of :func:`with_addresses`. Output columns: ``_neardup_file``, ``_neardup_word`` (row index
    // 64), ``_neardup_bits`` (bit ``row % 64`` set for each member), one row per word holding
    at least one member.
    """

    def transform(ids: DataFrame) -> DataFrame:
        addresses = addressed.select(column(id_col).alias(DOC_ID), FILE_PATH, ROW_INDEX)
        located = ids.select(DOC_ID).join(addresses, DOC_ID)
        offset = (F.col(ROW_INDEX) % WORD_ROWS).cast("int")
        bit = F.call_function("shiftleft", F.lit(1).cast("long"), offset)
        return located.groupBy(
            FILE_PATH, F.shiftright(F.col(ROW_INDEX), _WORD_SHIFT).alias(WORD)
        ).agg(F.bit_or(bit).alias(BITS))

    return transform


def address_values(addressed: DataFrame, id_col: str) -> Callable[[DataFrame], DataFrame]:
    """Document ids with a value -> the values by the words of their addresses, for
    ``df.transform``: the bitmap words' layout (:func:`address_words`) carrying a number per
    member instead of a bit.

    Input columns: ``doc_id`` (each id once), ``_neardup_duplicates`` (long); ``addressed``:
    ``id_col`` and the address columns. Output columns: ``_neardup_file``, ``_neardup_word``,
    ``_neardup_values`` (map: row % 64 -> value), one row per word holding a member.
    """

    def transform(ids: DataFrame) -> DataFrame:
        addresses = addressed.select(column(id_col).alias(DOC_ID), FILE_PATH, ROW_INDEX)
        located = ids.join(addresses, DOC_ID)
        offset = (F.col(ROW_INDEX) % WORD_ROWS).cast("int")
        entry = F.struct(offset.alias("offset"), F.col(DUPLICATES).alias("value"))
        return located.groupBy(
            FILE_PATH, F.shiftright(F.col(ROW_INDEX), _WORD_SHIFT).alias(WORD)
        ).agg(F.map_from_entries(F.collect_list(entry)).alias(VALUES))

    return transform


def with_word_values(words: DataFrame, name: str) -> Callable[[DataFrame], DataFrame]:
    """Addressed rows -> the same with a column ``name``: the value ``words`` (from
    :func:`address_values`, broadcast to them) holds at the row's address, else 0.

    Input columns: any, with the address columns of :func:`with_addresses`. Output columns: the
    same, then ``name`` (long, never null).
    """

    def transform(addressed: DataFrame) -> DataFrame:
        columns = [column(c) for c in addressed.columns]
        keyed = addressed.withColumn(WORD, F.shiftright(F.col(ROW_INDEX), _WORD_SHIFT))
        joined = keyed.join(F.broadcast(words), [FILE_PATH, WORD], "left")
        offset = (F.col(ROW_INDEX) % WORD_ROWS).cast("int")
        value = F.coalesce(F.element_at(F.col(VALUES), offset), F.lit(0).cast("long"))
        return joined.select(*columns, value.alias(name))

    return transform


def rows_of_words(words: DataFrame, members: bool) -> Callable[[DataFrame], DataFrame]:
    """Addressed rows -> those whose address is set in ``words`` (``members``) or not set, for
    ``df.transform``; ``words`` (from :func:`address_words`) is broadcast to them.

    Input columns: any, with the address columns of :func:`with_addresses`. Output columns:
    the same without the address columns.
    """

    def transform(addressed: DataFrame) -> DataFrame:
        columns = [column(c) for c in addressed.columns if c not in (FILE_PATH, ROW_INDEX)]
        keyed = addressed.withColumn(WORD, F.shiftright(F.col(ROW_INDEX), _WORD_SHIFT))
        joined = keyed.join(F.broadcast(words), [FILE_PATH, WORD], "left")
        offset = (F.col(ROW_INDEX) % WORD_ROWS).cast("int")
        bit = F.call_function("shiftright", F.col(BITS), offset).bitwiseAND(1)
        is_set = F.coalesce(bit == 1, F.lit(False))
        return joined.where(is_set if members else ~is_set).select(*columns)

    return transform
