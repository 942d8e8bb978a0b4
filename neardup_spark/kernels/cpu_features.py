"""Which CPU features numba compiles the kernels for: the same in every process that runs them
(the Python workers, the driver of a small run, a test), so that one compilation, cached on disk
by ``neardup warmup``, serves them all. Numba keys its cache by feature set: a process compiling
for other features than the workers' compiled every kernel again on its first call (~2 s each,
22 of them in a clean clone's test suite)."""

from __future__ import annotations

import os
import sys

WIDE_VECTORS = ",-prefer-256-bit"


def prefer_wide_vectors() -> bool:
    """Before numba is imported: compile for this CPU's features minus LLVM's ``prefer-256-bit``
    tuning, which keeps AVX-512 CPUs on 256-bit vectors. The MinHash loop is bound by 64-bit
    vector multiplies, twice as many per instruction at 512 bits; same results (integer
    arithmetic). Returns whether numba compiles for wide vectors. Changes nothing if numba is
    already imported, ``NUMBA_CPU_FEATURES`` is set, or the CPU has no AVX-512."""
    chosen = os.environ.get("NUMBA_CPU_FEATURES")
    if chosen is not None:
        return chosen.endswith(WIDE_VECTORS)
    if "numba" in sys.modules:
        return False
    try:
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features().flatten()
    except Exception:  # no llvmlite, or no host information: numba's defaults
        return False
    if "+avx512f" not in features.split(","):
        return False
    os.environ["NUMBA_CPU_FEATURES"] = features + WIDE_VECTORS
    return True
