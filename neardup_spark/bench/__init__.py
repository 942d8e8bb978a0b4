"""Benchmarks: neardup against the hashing floor, Spark MLlib and datasketch; the nightly case."""
