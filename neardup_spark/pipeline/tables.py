"""Outputs as tables of the session's catalog (``--output-table PREFIX``): ``PREFIX_clusters``,
``PREFIX_pairs`` and ``PREFIX_deduplicated``, each written by ``saveAsTable`` in the catalog's
default format (Delta on Databricks, Parquet elsewhere).

Guarantees (docs/output.md, "Tables"): each table is replaced by one write, atomic where the
table format is (a Delta table's overwrite is one transaction; a Parquet table of Spark's own
catalog is dropped, then written). The three together are not one commit: a run that fails
between them leaves the earlier ones new and the later ones old; a rerun (``--overwrite``)
replaces all three. A run given OUTPUT too keeps its stages there (resumable) and commits
``report.json`` there once the three tables are written.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from neardup_spark.errors import UserError
from neardup_spark.io.output import REPORT_FILE, OutputLayout

TABLES = ("clusters", "pairs", "deduplicated")

# OUTPUT of a run that writes tables: its report, manifest and _SUCCESS; the directories of a
# run that wrote Parquet there before are known (and replaced by the commit).
TABLES_LAYOUT = OutputLayout(
    committed=(REPORT_FILE,),
    extra=("clusters", "pairs", "deduplicated", "changed_clusters", "report.html"),
)


@dataclass(frozen=True)
class OutputTables:
    """The three tables of ``prefix`` (``db.crawl_dedup`` -> ``db.crawl_dedup_clusters``...)."""

    prefix: str
    overwrite: bool = False

    def name(self, table: str) -> str:
        return f"{self.prefix}_{table}"

    @property
    def names(self) -> list[str]:
        return [self.name(t) for t in TABLES]

    def check(self, spark: SparkSession) -> None:
        """Refuse (:class:`UserError`) a prefix whose tables exist unless ``overwrite``, before
        any job runs."""
        if not self.prefix or any(c in self.prefix for c in " /`"):
            raise UserError(f"--output-table: not a table name prefix: {self.prefix!r}")
        if self.overwrite:
            return
        existing = [name for name in self.names if spark.catalog.tableExists(name)]
        if existing:
            raise UserError(
                f"table {existing[0]} exists; pass --overwrite to replace the tables of "
                f"--output-table {self.prefix}"
            )

    def write(self, table: str, df: DataFrame) -> None:
        """Replace table ``table`` by ``df``'s rows, in the catalog's default format."""
        df.write.mode("overwrite").saveAsTable(self.name(table))
