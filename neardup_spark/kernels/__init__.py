"""Pure kernels: NumPy, PyArrow and mmh3 only. Nothing here imports Spark."""
