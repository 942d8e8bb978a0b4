"""The figures of ``report.html``, drawn with matplotlib from the sections of
:func:`neardup_spark.report.data.report_data`: each ``plot_*`` draws on a given Axes (so
notebooks can reuse them); :func:`figure_pngs` renders them as PNG bytes on a pyplot-free Agg
canvas.

matplotlib is imported here only, and only when a figure is drawn: every ``neardup`` command
loads this module with the CLI, and the plotting stack (about half a second) is needed only by
``neardup report`` and the report written after a dedupe.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn, not with the CLI
    from matplotlib.axes import Axes

METHOD_COLORS = {"minhash": "#1f77b4", "simhash": "#2ca02c", "exact": "#7f7f7f"}


def plot_similarity_histogram(ax: Axes, hist: dict[str, Any]) -> None:
    """Stacked histogram of the verified pairs' similarity, one colour per method."""
    edges = np.asarray(hist["edges"])
    width = np.diff(edges)
    bottom = np.zeros(len(width))
    for kind, counts in hist["counts"].items():
        values = np.asarray(counts, dtype=np.float64)
        ax.bar(
            edges[:-1],
            values,
            width=width,
            bottom=bottom,
            align="edge",
            color=METHOD_COLORS.get(kind, "#9467bd"),
            edgecolor="white",
            linewidth=0.3,
            label=f"{kind} ({int(values.sum()):,})",
        )
        bottom += values
    if hist.get("threshold") is not None:
        ax.axvline(hist["threshold"], color="#d62728", linestyle="--", label="threshold")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("similarity of the pair")
    ax.set_ylabel("verified pairs")
    ax.set_title("Similarity of verified pairs")
    if hist["counts"]:
        ax.legend(loc="upper left", fontsize=8)


def plot_removal_similarity(ax: Axes, similarity: dict[str, Any]) -> None:
    """The removed documents counted by their similarity to their kept document."""
    edges = np.asarray(similarity["edges"])
    counts = np.asarray(similarity["counts"], dtype=np.float64)
    ax.bar(
        edges[:-1],
        counts,
        width=np.diff(edges),
        align="edge",
        color="#ff7f0e",
        edgecolor="white",
        linewidth=0.3,
        label=f"removed documents ({int(counts.sum()):,})",
    )
    ax.axvline(similarity["threshold"], color="#d62728", linestyle="--", label="threshold")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("similarity to the kept document")
    ax.set_ylabel("removed documents")
    ax.set_title("Removed documents against their kept ones")
    ax.legend(loc="upper left", fontsize=8)


def plot_cluster_sizes(ax: Axes, sizes: dict[str, Any]) -> None:
    """Number of clusters of each size, log scale."""
    x = np.asarray(sizes["sizes"], dtype=np.int64)
    y = np.asarray(sizes["clusters"], dtype=np.int64)
    if x.size:
        ax.vlines(x, 0.8, y, color="#1f77b4", linewidth=2)
        ax.plot(x, y, "o", color="#1f77b4", markersize=4)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.8)
    if x.size and x.max() > 30:
        ax.set_xscale("log")
    else:
        from matplotlib.ticker import MaxNLocator  # deferred (module docstring)

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0.5, (x.max() if x.size else 1) + 0.5)
    ax.set_xlabel("cluster size (documents)")
    ax.set_ylabel("number of clusters (log scale)")
    ax.set_title("Cluster sizes")
    ax.grid(True, which="major", alpha=0.3)


def plot_candidate_curve(ax: Axes, banding: dict[str, Any]) -> None:
    """The S-curve ``1 - (1 - J**r)**b`` with the threshold marked."""
    b, r, t = banding["bands"], banding["rows"], banding["threshold"]
    ax.plot(banding["jaccard"], banding["probability"], color="#1f77b4", label=f"{b} x {r}")
    ax.axvline(t, color="#d62728", linestyle="--", label=f"threshold {t:g}")
    p_t = banding["probability_at_threshold"]
    ax.plot([t], [p_t], "o", color="#d62728")
    ax.annotate(f"P = {p_t:.4f}", (t, p_t), textcoords="offset points", xytext=(-80, -25))
    ax.axvline(
        banding["approximate_threshold"],
        color="#7f7f7f",
        linestyle=":",
        label=f"(1/b)^(1/r) = {banding['approximate_threshold']:.2f}",
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("Jaccard similarity of a pair")
    ax.set_ylabel("probability of being compared")
    ax.set_title(f"Candidate probability, {b} bands x {r} rows")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)


def plot_estimates(ax: Axes, estimates: dict[str, Any]) -> None:
    """MinHash estimate against exact Jaccard for verified pairs, with +-2 standard errors."""
    j = np.asarray(estimates["jaccard"])
    e = np.asarray(estimates["estimate"])
    m = estimates["num_perm"]
    lo = float(min(j.min(), e.min())) if j.size else 0.0
    lo = max(0.0, math.floor(lo * 20) / 20)
    line = np.linspace(lo, 1.0, 100)
    se = np.sqrt(line * (1.0 - line) / m)
    ax.fill_between(line, line - 2 * se, line + 2 * se, color="#ff7f0e", alpha=0.2, label="±2 SE")
    ax.plot(line, line, color="#ff7f0e", linewidth=1, label="estimate = Jaccard")
    ax.scatter(j, e, s=6, alpha=0.5, color="#1f77b4", label=f"pairs ({j.size:,})")
    ax.set_xlim(lo, 1.0)
    ax.set_ylim(lo, 1.0)
    ax.set_xlabel("exact Jaccard")
    ax.set_ylabel(f"MinHash estimate ({m} values)")
    ax.set_title("Estimate against exact Jaccard")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)


def _png(
    draw: Callable[[Axes, dict[str, Any]], None],
    section: dict[str, Any],
    size: tuple[float, float] = (7.0, 4.0),
) -> bytes:
    """Draw one figure on a pyplot-free Agg canvas (no global backend state) as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred (module docstring)
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    draw(ax, section)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def figure_pngs(data: dict[str, Any]) -> dict[str, bytes]:
    """PNG bytes of each figure the run has: ``similarities``, ``cluster_sizes``, ``removals``
    (the anchored rule's removed documents by similarity), and for MinHash runs ``banding`` and
    ``estimates``."""
    out = {
        "similarities": _png(plot_similarity_histogram, data["similarity_histogram"]),
        "cluster_sizes": _png(plot_cluster_sizes, data["cluster_sizes"]),
    }
    similarity = (data.get("removals") or {}).get("similarity")
    if similarity:
        out["removals"] = _png(plot_removal_similarity, similarity)
    if data.get("banding"):
        out["banding"] = _png(plot_candidate_curve, data["banding"])
    if data.get("estimates") and data["estimates"]["jaccard"]:
        out["estimates"] = _png(plot_estimates, data["estimates"], (5.5, 5.0))
    return out
