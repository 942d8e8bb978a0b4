"""The seed article's worked examples, computed with the package's kernels.

Everything ``notebooks/worked_examples.ipynb`` shows comes from here, so the notebook holds no
logic of its own: the 15-shingle table of the running example, its Jaccard coefficient of 1/3,
the choice of ``k`` (``d3``/``d4``), the by-hand MinHash table with ``h(x) = (a x + b) mod 17``,
the standard errors, the banding probabilities and thresholds, the SimHash bit table and
fingerprints, and the data and drawing of both figures (30 runs of the MinHash estimate against
the number of hash functions; candidate-probability curves for 40x5, 20x10 and 10x20).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from neardup_spark.kernels.jaccard import intersection_size, jaccard
from neardup_spark.kernels.lsh import approximate_threshold, candidate_probability
from neardup_spark.kernels.minhash import (
    ModPrimeFamily,
    MultiplyShiftFamily,
    estimate,
    signatures,
    standard_error,
)
from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.kernels.shingles import shingle_sets, shingle_strings
from neardup_spark.kernels.simhash import bit_totals, hamming, md5_64, simhash_text

if TYPE_CHECKING:
    from matplotlib.axes import Axes

D1 = "the crawler fetches each page and follows its links to new pages"
D2 = "the crawler fetches every page and follows its links to other pages"
D3 = "a rose is a rose is a rose"
D4 = "a rose is a flower which is a rose"

K = 3  # words per shingle in the running example
PRIME = 17
BY_HAND_PARAMS: tuple[tuple[int, int], ...] = ((1, 0), (3, 5), (5, 2), (7, 11), (11, 3), (13, 8))
STANDARD_ERROR_SIZES = (10, 100, 200)
ARTICLE_BANDINGS: tuple[tuple[int, int], ...] = ((40, 5), (20, 10), (10, 20))
RUNS = 30
MAX_HASHES = 200
SIMHASH_BITS_SHOWN = 8
HASH_SEED = 42  # word-hash seed of the shingle sets; it does not change a Jaccard


def hash_set(text: str, k: int = K, seed: int = HASH_SEED) -> np.ndarray:
    """The job's sorted shingle-hash set of one raw text."""
    normalized = pa.array([normalize_text(text)], pa.large_string())
    return shingle_sets(normalized, k, seed).doc(0)


def shingle_table(a: str = D1, b: str = D2, k: int = K) -> list[dict[str, Any]]:
    """The union of both texts' ``k``-shingles in alphabetical order, numbered from 0, with
    whether each text holds it (the article's 15-row table)."""
    sa = set(shingle_strings(normalize_text(a) or "", k))
    sb = set(shingle_strings(normalize_text(b) or "", k))
    return [
        {"number": i, "shingle": s, "in_a": s in sa, "in_b": s in sb}
        for i, s in enumerate(sorted(sa | sb))
    ]


def jaccard_summary(a: str = D1, b: str = D2, k: int = K) -> dict[str, Any]:
    """Shingle counts, shared, union and the exact Jaccard (from the job's hash sets)."""
    ha, hb = hash_set(a, k), hash_set(b, k)
    shared = intersection_size(ha, hb)
    return {
        "k": k,
        "shingles_a": int(ha.size),
        "shingles_b": int(hb.size),
        "shared": shared,
        "union": int(ha.size + hb.size - shared),
        "jaccard": jaccard(ha, hb),
    }


def choice_of_k(a: str = D3, b: str = D4, ks: Sequence[int] = (2, 3)) -> list[dict[str, Any]]:
    """:func:`jaccard_summary` of ``d3``/``d4`` for each ``k`` (3/7 at k = 3, 1/2 at k = 2)."""
    return [jaccard_summary(a, b, k) for k in ks]


def by_hand_minhash(
    a: str = D1,
    b: str = D2,
    params: Sequence[tuple[int, int]] = BY_HAND_PARAMS,
    prime: int = PRIME,
    k: int = K,
) -> dict[str, Any]:
    """MinHash by hand: shingles numbered as in :func:`shingle_table`, hashed by
    ``h(x) = (a x + b) mod prime``; per function the minimum over each text and the shingle
    that gives it. Returns ``rows`` and the ``estimate`` (fraction of agreeing rows)."""
    table = shingle_table(a, b, k)
    num_a = np.array([r["number"] for r in table if r["in_a"]], dtype=np.uint64)
    num_b = np.array([r["number"] for r in table if r["in_b"]], dtype=np.uint64)
    family = ModPrimeFamily(
        a=tuple(p[0] for p in params), b=tuple(p[1] for p in params), prime=prime
    )
    sig = signatures(
        np.array([0, num_a.size, num_a.size + num_b.size]),
        np.concatenate([num_a, num_b]),
        family,
    )
    rows = []
    for i, (ai, bi) in enumerate(params):
        min_a, min_b = int(sig[0, i]), int(sig[1, i])
        arg_a = next(int(x) for x in num_a if (ai * int(x) + bi) % prime == min_a)
        arg_b = next(int(x) for x in num_b if (ai * int(x) + bi) % prime == min_b)
        rows.append(
            {
                "a": ai,
                "b": bi,
                "min_a": min_a,
                "shingle_a": arg_a,
                "min_b": min_b,
                "shingle_b": arg_b,
                "agree": min_a == min_b,
            }
        )
    return {"rows": rows, "estimate": estimate(sig[0], sig[1])}


def standard_errors(
    j: float = 1 / 3, sizes: Sequence[int] = STANDARD_ERROR_SIZES
) -> list[dict[str, float]]:
    """``sqrt(J (1 - J) / m)`` for each sketch size ``m`` (0.149, 0.047, 0.033 at J = 1/3)."""
    return [{"m": m, "standard_error": standard_error(j, m)} for m in sizes]


def banding_probabilities(
    bands: int = 20, rows: int = 10, jaccards: Sequence[float] = (0.9, 0.5, 1 / 3)
) -> list[dict[str, float]]:
    """Probability ``1 - (1 - J**r)**b`` that a pair is compared (0.9998, 0.019, 0.0003)."""
    return [
        {"jaccard": j, "probability": float(candidate_probability(j, bands, rows))}
        for j in jaccards
    ]


def banding_thresholds(
    bandings: Sequence[tuple[int, int]] = ARTICLE_BANDINGS,
) -> list[dict[str, float]]:
    """Where each curve rises, ``(1/b)**(1/r)``: about 0.48, 0.74 and 0.89."""
    return [{"bands": b, "rows": r, "threshold": approximate_threshold(b, r)} for b, r in bandings]


def simhash_bit_table(text: str = D1, bits: int = SIMHASH_BITS_SHOWN) -> dict[str, Any]:
    """The article's SimHash table: each distinct word (alphabetical) with the first ``bits``
    bits of its MD5-64 hash, the signed totals of those bit positions (weight 1 per word) and
    the resulting SimHash bits."""
    words = sorted(set((normalize_text(text) or "").split()))
    hashes = md5_64(words)
    totals = bit_totals(hashes)[:bits]
    return {
        "rows": [
            {"word": w, "bits": format(int(h), "064b")[:bits]}
            for w, h in zip(words, hashes.tolist(), strict=True)
        ],
        "totals": [int(t) for t in totals],
        "simhash_bits": "".join("1" if t > 0 else "0" for t in totals),
    }


def simhash_fingerprints(texts: Sequence[str] = (D1, D2, D3)) -> list[str]:
    """Reference SimHash (MD5 of words, weight 1) of each text, as 16 hex digits."""
    return [format(simhash_text(t), "016x") for t in texts]


def simhash_angles(a: str = D1, b: str = D2, bits: int = 64) -> dict[str, float]:
    """Cosine of the word-count vectors, their angle, the agreement Charikar's formula
    predicts (``1 - theta/pi``), the agreement observed, and its binomial standard deviation."""
    wa = (normalize_text(a) or "").split()
    wb = (normalize_text(b) or "").split()
    vocab = sorted(set(wa) | set(wb))
    va = np.array([wa.count(w) for w in vocab], dtype=np.float64)
    vb = np.array([wb.count(w) for w in vocab], dtype=np.float64)
    cosine = float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))
    theta = math.acos(min(1.0, cosine))
    predicted = 1.0 - theta / math.pi
    distance = int(
        hamming(np.array([simhash_text(a)], np.uint64), np.array([simhash_text(b)], np.uint64))[0]
    )
    return {
        "cosine": cosine,
        "angle_degrees": math.degrees(theta),
        "predicted_agreement": predicted,
        "differing_bits": distance,
        "observed_agreement": (bits - distance) / bits,
        "standard_deviation": math.sqrt(predicted * (1.0 - predicted) / bits),
    }


def estimate_runs(
    a: str = D1,
    b: str = D2,
    max_hashes: int = MAX_HASHES,
    runs: int = RUNS,
    k: int = K,
    first_seed: int = 0,
) -> np.ndarray:
    """MinHash estimates of ``J(a, b)``: ``float64[runs, max_hashes]``, where ``[i, m - 1]`` is
    run ``i``'s estimate from its first ``m`` hash functions. Each run draws its own functions
    (the job's :class:`MultiplyShiftFamily`, seed ``first_seed + i``)."""
    ha, hb = hash_set(a, k), hash_set(b, k)
    offsets = np.array([0, ha.size, ha.size + hb.size])
    values = np.concatenate([ha, hb])
    out = np.empty((runs, max_hashes), dtype=np.float64)
    m = np.arange(1, max_hashes + 1)
    for i in range(runs):
        sig = signatures(offsets, values, MultiplyShiftFamily.from_seed(max_hashes, first_seed + i))
        out[i] = np.cumsum(sig[0] == sig[1]) / m
    return out


def run_summary(estimates: np.ndarray, m: int = MAX_HASHES) -> dict[str, float]:
    """Median and middle half (25th-75th percentile) of the runs at ``m`` hash functions."""
    column = estimates[:, m - 1]
    q1, median, q3 = np.percentile(column, [25, 50, 75])
    return {"m": m, "median": float(median), "q1": float(q1), "q3": float(q3)}


def plot_estimate_runs(ax: Axes, estimates: np.ndarray, j: float = 1 / 3) -> None:
    """Figure 1: every run's estimate against the number of hash functions, the middle half of
    the runs shaded, the true ``J`` and one standard error either side dashed."""
    m = np.arange(1, estimates.shape[1] + 1)
    for run in estimates:
        ax.plot(m, run, color="#1f77b4", alpha=0.18, linewidth=0.8)
    q1, q3 = np.percentile(estimates, [25, 75], axis=0)
    ax.fill_between(m, q1, q3, color="#1f77b4", alpha=0.3, label="middle half of the runs")
    se = np.sqrt(j * (1 - j) / m)
    ax.axhline(j, color="black", linewidth=1.2, label=f"true J = {j:.3f}")
    ax.plot(m, j + se, "k--", linewidth=1, label="± one standard error")
    ax.plot(m, j - se, "k--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlim(1, m[-1])
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks([1, 2, 5, 10, 20, 50, 100, 200])
    ax.set_xticklabels(["1", "2", "5", "10", "20", "50", "100", "200"])
    ax.set_xlabel("number of hash functions m")
    ax.set_ylabel("estimate of J")
    ax.set_title(f"MinHash estimates of J(d1, d2), {estimates.shape[0]} runs")
    ax.legend(loc="upper right", fontsize=8)


def plot_candidate_curves(
    ax: Axes, bandings: Sequence[tuple[int, int]] = ARTICLE_BANDINGS, points: int = 401
) -> None:
    """Figure 2: ``1 - (1 - J**r)**b`` for each ``(b, r)``, thresholds dotted."""
    js = np.linspace(0.0, 1.0, points)
    for b, r in bandings:
        (line,) = ax.plot(js, candidate_probability(js, b, r), label=f"{b} bands of {r}")
        t = approximate_threshold(b, r)
        ax.axvline(t, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("Jaccard coefficient of the pair")
    ax.set_ylabel("probability that the pair is compared")
    ax.set_title("Candidate probability, 200-value sketch")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
