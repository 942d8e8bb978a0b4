"""The figures of report.html: one PNG per section the run has, each drawing its data; and the
plotting stack loaded only when a figure is drawn."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from matplotlib.figure import Figure

from neardup_spark.report.data import report_data
from neardup_spark.report.figures import (
    figure_pngs,
    plot_candidate_curve,
    plot_cluster_sizes,
    plot_similarity_histogram,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_one_png_per_figure_of_a_minhash_run(data):
    pngs = figure_pngs(data)
    # (removals: the anchored rule's, the default)
    assert set(pngs) == {"similarities", "cluster_sizes", "banding", "estimates", "removals"}
    assert all(png.startswith(PNG_SIGNATURE) for png in pngs.values())


def test_a_simhash_run_has_no_curve_and_no_scatter(simhash_run):
    out, _ = simhash_run
    expected = {"similarities", "cluster_sizes", "removals"}
    assert set(figure_pngs(report_data(str(out)))) == expected


def test_histogram_bars_are_the_counts(data):
    ax = Figure().add_subplot()
    plot_similarity_histogram(ax, data["similarity_histogram"])
    heights = sum(patch.get_height() for patch in ax.patches)
    assert heights == data["similarity_histogram"]["total"]
    (threshold,) = [line for line in ax.get_lines() if line.get_label() == "threshold"]
    assert threshold.get_xdata()[0] == 0.8


def test_cluster_sizes_and_curve_draw_their_points(data):
    ax = Figure().add_subplot()
    plot_cluster_sizes(ax, data["cluster_sizes"])
    (dots,) = ax.get_lines()
    assert dots.get_xdata().tolist() == data["cluster_sizes"]["sizes"]
    assert dots.get_ydata().tolist() == data["cluster_sizes"]["clusters"]
    ax = Figure().add_subplot()
    plot_candidate_curve(ax, data["banding"])
    curve = ax.get_lines()[0]
    np.testing.assert_array_equal(curve.get_ydata(), data["banding"]["probability"])


def test_report_modules_import_without_matplotlib():
    code = (
        "import sys, neardup_spark.report.data, neardup_spark.report.html; "
        "print(sorted(m for m in sys.modules if m.startswith('matplotlib')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
