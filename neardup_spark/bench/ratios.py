"""Numbers derived from the rows of a benchmark: how time grows with size, and each row's speed
against the ``floor`` and ``spark-mllib`` rows at the same size.

*growth exponent* of a row between consecutive sizes ``n1 < n2``: ``log(t2 / t1) /
log(n2 / n1)`` on work seconds (1.0 = linear). *x floor*, *x mllib*: the row's docs/s (work)
over the ``floor`` / ``spark-mllib`` row's at the same size; *x mllib wall*: the same on
whole-process wall seconds (JVM start included). *time vs*: work seconds over those of the
row :data:`TIME_REFERENCES` names (``neardup-boilerplate``: floor; ``neardup-strip``:
``neardup-minhash``; ``neardup-minhash``: ``neardup-components``).
"""

from __future__ import annotations

import math
from typing import Any


def growth_exponent(n1: float, t1: float | None, n2: float, t2: float | None) -> float | None:
    """``log(t2 / t1) / log(n2 / n1)``: how time grows with size (1.0 = linear).

    >>> growth_exponent(10_000, 2.0, 100_000, 20.0)
    1.0
    """
    if t1 is None or t2 is None or t1 <= 0 or t2 <= 0 or n1 <= 0 or n2 <= 0 or n1 == n2:
        return None
    return math.log(t2 / t1) / math.log(n2 / n1)


def ratio(value: float | None, reference: float | None) -> float | None:
    """``value / reference``, None when either is missing or the reference is 0."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def derive(rows: list[dict[str, Any]]) -> None:
    """Growth exponents and ratios against floor, spark-mllib and rensa (in place)."""
    ok = {(r["docs"], r["row"]): r for r in rows if r.get("status") == "ok"}
    sizes = sorted({r["docs"] for r in rows})
    for r in rows:
        for key in (
            "growth_exponent",
            "vs_floor",
            "vs_mllib",
            "vs_mllib_wall",
            "vs_rensa_wall",
            "time_vs",
        ):
            r[key] = None
        if r.get("status") != "ok":
            continue
        earlier = [n for n in sizes if n < r["docs"] and (n, r["row"]) in ok]
        if earlier:
            prev = ok[(earlier[-1], r["row"])]
            r["growth_exponent"] = growth_exponent(
                prev["docs"], prev["work_seconds"], r["docs"], r["work_seconds"]
            )
            r["growth_from_docs"] = prev["docs"]
        floor = ok.get((r["docs"], "floor"))
        mllib = ok.get((r["docs"], "spark-mllib"))
        if floor:
            r["vs_floor"] = ratio(r["docs_per_second"], floor["docs_per_second"])
        if mllib:
            r["vs_mllib"] = ratio(r["docs_per_second"], mllib["docs_per_second"])
            r["vs_mllib_wall"] = ratio(r["docs_per_second_wall"], mllib["docs_per_second_wall"])
        rensa = ok.get((r["docs"], "rensa"))
        if rensa:  # whole process: rensa has no JVM to start
            r["vs_rensa_wall"] = ratio(r["docs_per_second_wall"], rensa["docs_per_second_wall"])
        reference = ok.get((r["docs"], TIME_REFERENCES.get(r["row"], "")))
        if reference:
            r["time_vs"] = ratio(r["work_seconds"], reference["work_seconds"])


# Rows whose work seconds are compared with another row's (the boilerplate targets of issue
# 17: boilerplate <= 1.5x the floor, dedupe --strip-boilerplate <= 1.4x plain dedupe; Connect:
# <= 1.25x the classic run; the anchored default: <= 1.1x the components rule's work, issue 44).
TIME_REFERENCES = {
    "neardup-minhash": "neardup-components",
    "neardup-boilerplate": "floor",
    "neardup-strip": "neardup-minhash",
    "neardup-connect": "neardup-minhash",
}
