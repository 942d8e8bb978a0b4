"""neardup-spark: near-duplicate detection for web-crawl corpora on Apache Spark.

Pure kernels live in :mod:`neardup_spark.kernels` (NumPy, no Spark); Spark stages in
:mod:`neardup_spark.stages`; :func:`neardup_spark.pipeline.dedupe.dedupe` chains them.
"""

# The package version (pyproject.toml reads it); CHANGELOG.md says what each one changed.
__version__ = "0.6.0"

__all__ = ["__version__"]
