"""neardup-spark: near-duplicate detection for web-crawl corpora on Apache Spark.

Pure kernels live in :mod:`neardup_spark.kernels` (NumPy, no Spark); Spark stages in
:mod:`neardup_spark.stages`; :func:`neardup_spark.pipeline.dedupe.dedupe` chains them.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
