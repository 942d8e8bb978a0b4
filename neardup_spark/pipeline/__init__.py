"""The dedupe run: chains the stages, decides when Spark acts, writes outputs and the report.

``dedupe(df, config)`` is the Python API; ``run(spark, input, output, config)`` the command
line's path.
"""

from neardup_spark.pipeline.dedupe import DedupeResult, dedupe, run

__all__ = ["DedupeResult", "dedupe", "run"]
