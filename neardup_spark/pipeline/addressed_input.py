"""Reading only some documents of a large input, or all but some, without shuffling it.

Where a set of ids is small (the execution settings' ``broadcast_max_rows``) it is broadcast to
the input scan. Above that, a join would shuffle every text of the corpus:
when the input is a Parquet scan, the set goes through the documents' addresses instead.
``deduplicated/`` keeps or drops each input row by a bitmap word
(:mod:`neardup_spark.stages.addresses`), so only ids travel through a shuffle. Verification
over local Parquet files (which every executor reads, as Spark does) locates each side of each
candidate pair at its address, whatever their number, and its tasks read the texts there in
address order (:mod:`neardup_spark.batch.addressed_texts`): each candidate's text read once,
and one shuffle of texts, the one that brings a pair's sides together, as with a broadcast (a
join by id would shuffle the candidates' texts once more); at 1M pages as fast as the
broadcast join, and no step in cost at the broadcast limit. On other storage, above the limit,
it reads them through the bitmap words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from neardup_spark.batch.addressed_texts import (
    FILE_NO,
    AddressedFiles,
    texts_at_addresses_fn,
)
from neardup_spark.batch.scoring import SIDE
from neardup_spark.columns import DOC_A, DOC_B, DOC_ID, TEXT
from neardup_spark.io.paths import from_spark_uri, local_path
from neardup_spark.pipeline.execution import grouped_input
from neardup_spark.runtime.engine import default_parallelism, from_arrow
from neardup_spark.stages.addresses import (
    FILE_PATH,
    ROW_INDEX,
    WORD_ROWS,
    address_values,
    address_words,
    rows_of_words,
    with_addresses,
    with_word_values,
)
from neardup_spark.stages.names import column
from neardup_spark.stages.verify import side_requests

# Rows of a file per block of the address-ordered read: a task reads whole blocks, so a row
# group is read by one task (two when it straddles a block's end).
_BLOCK_SHIFT = 16
# Splits of the pass's tasks per task of a scan reading ids and addresses alone.
_ID_SCAN_GROUPING = 4


@dataclass(frozen=True)
class AddressedInput:
    """The input scan with each row's address (file, row), and its number of files."""

    scan: DataFrame
    files: int
    id_col: str
    text_col: str
    # The local Parquet files' schemas (from the run's facts: footers read once), by local path.
    schemas: Mapping[str, pa.Schema] = field(default_factory=dict)
    # Tasks of the scans that read no text (ids and addresses): a few splits each, as each
    # task costs more than its reading (10M pages: 274 tasks 5.3 s, 68 tasks 2.9 s).
    id_scan_tasks: int = 0

    @property
    def id_scan(self) -> DataFrame:
        """:attr:`scan` for the queries that read its ids and addresses alone."""
        return self.scan.coalesce(self.id_scan_tasks) if self.id_scan_tasks else self.scan

    def words_fit(self, input_rows: int, limit: int) -> bool:
        """The bitmap words of any id set can be broadcast (at most one per 64 rows of each
        file; ``limit``: the most rows broadcast)."""
        return input_rows // WORD_ROWS + self.files <= limit

    def texts_of(self, ids: DataFrame) -> DataFrame:
        """``doc_id``, ``text`` of the documents in ``ids`` (column ``doc_id``; repeats
        allowed)."""
        words = ids.transform(address_words(self.id_scan, self.id_col))
        texts = self.scan.select(
            column(self.id_col).alias(DOC_ID),
            column(self.text_col).alias(TEXT),
            FILE_PATH,
            ROW_INDEX,
        )
        return texts.transform(rows_of_words(words, members=True))

    def side_texts(self, candidates: DataFrame, partitions: int) -> DataFrame:
        """One row per side of each candidate pair (``doc_a``, ``doc_b``; each pair once):
        ``doc_a``, ``doc_b``, ``side`` (0 for ``doc_a``'s text, 1 for ``doc_b``'s) and ``text``,
        read by ``partitions`` tasks at the documents' addresses in the input files, in address
        order (local Parquet files holding both columns at their top level: the plan's
        ``verify_texts: addresses``)."""
        files = self.readable_files
        if files is None:
            raise RuntimeError(f"the input's texts cannot be read at their addresses: {self}")
        addresses = self.numbered_addresses(files)
        located = side_requests(candidates).join(addresses, DOC_ID)
        block = F.shiftright(F.col(ROW_INDEX), _BLOCK_SHIFT)
        ordered = located.repartition(partitions, FILE_NO, block).sortWithinPartitions(
            FILE_NO, ROW_INDEX
        )
        text_type = self.scan.select(column(self.text_col)).schema.fields[0].dataType
        carried = [DOC_A, DOC_B, SIDE]
        schema = T.StructType(
            [*(ordered.schema[name] for name in carried), T.StructField(TEXT, text_type, False)]
        )
        read = texts_at_addresses_fn(files, carried, to_arrow_type(text_type))
        columns = [FILE_NO, ROW_INDEX, DOC_ID, *carried]
        return ordered.select(*columns).mapInArrow(read, schema)

    def numbered_addresses(
        self, files: AddressedFiles, per_file: dict[str, pa.Array] | None = None
    ) -> DataFrame:
        """Every input row's ``doc_id`` and address as ``_neardup_file_no`` (its file's place in
        ``files.paths``) and ``_neardup_row``, with ``per_file``'s columns (a value per file)."""
        # built from Arrow: a DataFrame of Python rows would start Python workers to read them
        numbers = from_arrow(
            self.scan.sparkSession,
            pa.table(
                {
                    FILE_PATH: pa.array(files.paths, pa.string()),
                    FILE_NO: pa.array(range(len(files.paths)), pa.int32()),
                    **(per_file or {}),
                }
            ),
        )
        return (
            self.id_scan.select(column(self.id_col).alias(DOC_ID), FILE_PATH, ROW_INDEX)
            .join(F.broadcast(numbers), FILE_PATH)
            .drop(FILE_PATH)
        )

    @cached_property
    def readable_files(self) -> AddressedFiles | None:
        """The input's files as Spark names them in its addresses, with the id and text
        columns' names in them, when each is a local Parquet file holding both at its top
        level; else None. Found once (a Spark job; the footers the run read), for verification
        and ``deduplicated/`` alike."""
        if not self.schemas:
            return None
        uris = sorted(row[0] for row in self.id_scan.select(FILE_PATH).distinct().collect())
        names: set[tuple[str, str]] = set()
        for uri in uris:
            schema = self.schemas.get(local_path(from_spark_uri(uri)))
            if schema is None:  # not a file the run listed
                return None
            found = (_column_named(schema, self.id_col), _column_named(schema, self.text_col))
            if None in found:
                return None
            names.add(found)  # type: ignore[arg-type]
        if len(names) != 1:  # the files name a column differently (case): read by Spark
            return None
        id_name, text_name = names.pop()
        return AddressedFiles(tuple(uris), id_name, text_name, open_local_file)

    def rows_without(
        self, ids: DataFrame, counts: DataFrame | None = None, name: str = ""
    ) -> DataFrame:
        """The input rows (its own columns) of the documents not in ``ids`` (column
        ``doc_id``), and a last column ``name`` (unless "") holding the count ``counts``
        (``doc_id``, ``_neardup_duplicates``) gives the row, else 0: by the words of their
        addresses too, broadcast to the scan (no shuffle of the rows)."""
        words = ids.transform(address_words(self.id_scan, self.id_col))
        scan = self.scan
        if name and counts is not None:
            values = counts.transform(address_values(self.id_scan, self.id_col))
            scan = scan.transform(with_word_values(values, name))
        return scan.transform(rows_of_words(words, members=False))


def addressed_input(
    df: DataFrame, id_col: str, text_col: str, schemas: Mapping[str, pa.Schema] | None = None
) -> AddressedInput | None:
    """``df`` with addresses when it is a Parquet scan, else None; ``schemas``: its local
    Parquet files' schemas by local path (the run's facts), when they may be read here."""
    scan = with_addresses(df)
    if scan is None:
        return None
    files = df.inputFiles()
    # each of its scans in the per-document pass's tasks: a task per split cost 1.8 s at 1M
    grouped, tasks = grouped_input(scan)
    cores = default_parallelism(df.sparkSession)
    id_tasks = max(cores, math.ceil(tasks / _ID_SCAN_GROUPING))
    return AddressedInput(
        grouped,
        len(files),
        id_col,
        text_col,
        dict(schemas or {}),
        id_tasks if id_tasks < tasks else 0,
    )


def open_local_file(uri: str) -> Any:
    """A local file as Spark names it (``file:/data/my%20corpus/x.parquet``), memory-mapped."""
    return pa.memory_map(local_path(from_spark_uri(uri)), "r")


def _column_named(schema: pa.Schema, name: str) -> str | None:
    """The top-level column of ``schema`` that Spark reads as ``name`` (its own spelling, else
    the one column spelled so in another case), of a type verification reads; else None."""
    matches = [field for field in schema if field.name == name] or [
        field for field in schema if field.name.lower() == name.lower()
    ]
    if len(matches) != 1 or pa.types.is_nested(matches[0].type):
        return None
    return matches[0].name
