"""Reading only some documents of a large input, or all but some, without shuffling it.

Where a set of ids is small (:data:`~neardup_spark.pipeline.execution.BROADCAST_MAX_ROWS`) it
is broadcast to the input scan. Above that, a join would shuffle every text of the corpus:
when the input is a Parquet scan, the set goes through the documents' addresses instead and
the scan keeps or drops each row by a bitmap word (:mod:`neardup_spark.stages.addresses`),
so only ids travel through a shuffle. Verification reads the texts of the candidates this way,
and ``deduplicated/`` the input rows of the documents that are not removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark.columns import DOC_ID, TEXT
from neardup_spark.pipeline.execution import BROADCAST_MAX_ROWS, grouped_input
from neardup_spark.stages.addresses import (
    FILE_PATH,
    ROW_INDEX,
    WORD_ROWS,
    address_words,
    rows_of_words,
    with_addresses,
)


@dataclass(frozen=True)
class AddressedInput:
    """The input scan with each row's address (file, row), and its number of files."""

    scan: DataFrame
    files: int
    id_col: str
    text_col: str

    def words_fit(self, input_rows: int) -> bool:
        """The bitmap words of any id set can be broadcast (at most one per 64 rows of each
        file)."""
        return input_rows // WORD_ROWS + self.files <= BROADCAST_MAX_ROWS

    def texts_of(self, ids: DataFrame) -> DataFrame:
        """``doc_id``, ``text`` of the documents in ``ids`` (column ``doc_id``; repeats
        allowed)."""
        words = ids.transform(address_words(self.scan, self.id_col))
        texts = self.scan.select(
            F.col(self.id_col).alias(DOC_ID),
            F.col(self.text_col).alias(TEXT),
            FILE_PATH,
            ROW_INDEX,
        )
        return grouped_input(texts)[0].transform(rows_of_words(words, members=True))

    def rows_without(self, ids: DataFrame) -> DataFrame:
        """The input rows (its own columns) of the documents not in ``ids`` (column
        ``doc_id``)."""
        words = ids.transform(address_words(self.scan, self.id_col))
        return grouped_input(self.scan)[0].transform(rows_of_words(words, members=False))


def addressed_input(df: DataFrame, id_col: str, text_col: str) -> AddressedInput | None:
    """``df`` with addresses when it is a Parquet scan, else None."""
    scan = with_addresses(df)
    if scan is None:
        return None
    return AddressedInput(scan, len(df.inputFiles()), id_col, text_col)
