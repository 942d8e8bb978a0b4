"""Pure kernels: NumPy, PyArrow and mmh3 only. Nothing here imports Spark."""

from neardup_spark.kernels.cpu_features import prefer_wide_vectors

# Before any kernel imports numba: every process compiles for the same features (cpu_features.py).
prefer_wide_vectors()
