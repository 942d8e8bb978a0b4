"""64-bit integer mixing used to combine hashes, vectorised over NumPy arrays.

All arithmetic is on ``uint64`` and wraps modulo 2**64 on purpose.
"""

from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1
# Finaliser constants of MurmurHash3's fmix64 (Appleby).
FMIX_C1 = np.uint64(0xFF51AFD7ED558CCD)
FMIX_C2 = np.uint64(0xC4CEB9FE1A85EC53)
# An odd 64-bit constant (the golden ratio), used to spread small integers before mixing.
GOLDEN64 = np.uint64(0x9E3779B97F4A7C15)

_S33 = np.uint64(33)


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: a bijection on uint64 with full avalanche.

    >>> int(fmix64(np.array([0], dtype=np.uint64))[0])
    0
    >>> int(fmix64(np.array([1], dtype=np.uint64))[0]) != 1
    True
    """
    x = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> _S33
        x *= FMIX_C1
        x ^= x >> _S33
        x *= FMIX_C2
        x ^= x >> _S33
    return x


def splitmix64_stream(seed: int, n: int) -> np.ndarray:
    """``n`` pseudo-random uint64 values derived deterministically from ``seed`` (SplitMix64).

    Used to derive hash-family parameters from the job's seed, identically on every machine.

    >>> splitmix64_stream(7, 3).tolist() == splitmix64_stream(7, 3).tolist()
    True
    """
    state = np.uint64(seed & MASK64)
    counters = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = state + counters * GOLDEN64
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z
