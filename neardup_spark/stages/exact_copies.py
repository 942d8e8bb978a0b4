"""Exact copies: documents with the same normalised text, joined to the smallest id."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup_spark.columns import DOC_A, DOC_B, DOC_ID, EXACT_FP, HAS_TEXT, NORMALIZED


def exact_copy_edges(compare_text: bool = False) -> Callable[[DataFrame], DataFrame]:
    """Text features -> one edge from each exact copy to the smallest id with the same content.

    Documents without text never match (each stays a singleton). With ``compare_text`` the
    grouping key is the normalised text itself, so a 64-bit collision cannot merge two texts.
    Edges per group are a star: linear in the group's size.

    Input columns: ``doc_id``, ``has_text``, ``exact_fp`` (and ``normalized`` with
    ``compare_text``). Output columns: ``doc_a`` (the group's smallest id), ``doc_b`` (a copy).
    """

    def transform(features: DataFrame) -> DataFrame:
        keys = [EXACT_FP, NORMALIZED] if compare_text else [EXACT_FP]
        smallest = F.min(DOC_ID).over(Window.partitionBy(*keys))
        return (
            features.where(F.col(HAS_TEXT))
            .select(F.col(DOC_ID).alias(DOC_B), smallest.alias(DOC_A))
            .where(F.col(DOC_B) != F.col(DOC_A))
            .select(DOC_A, DOC_B)
        )

    return transform
