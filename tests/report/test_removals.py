"""The report's removals (report.json's section, read into report_data and shown by
report.html): the largest clusters, the removed documents' similarity to their kept ones, and
what the components rule removes over the same pairs."""

from __future__ import annotations

import numpy as np
import pytest

from neardup_spark.config import DedupeConfig, build_config
from neardup_spark.pipeline.dedupe import run
from neardup_spark.pipeline.removals import bin_numbers, similarity_edges, similarity_floor
from neardup_spark.report.data import report_data
from neardup_spark.report.figures import figure_pngs
from neardup_spark.report.html import render_html
from tests.nightly.history import read


@pytest.fixture(scope="module")
def anchored_run(minhash_run):
    """The package's default run (conftest.py), under the anchored rule, the default."""
    return minhash_run


def test_bins_are_fixed_from_the_threshold_to_one():
    assert similarity_edges(similarity_floor(DedupeConfig(threshold=0.9))) == [0.9, 0.95, 1.0]
    simhash = similarity_floor(DedupeConfig(method="simhash"))
    assert similarity_edges(simhash) == [0.95, 1.0]
    assert similarity_edges(similarity_floor(DedupeConfig(method="exact"))) == [0.95, 1.0]
    edges = similarity_edges(0.5)
    assert len(edges) == 11 and edges[0] == 0.5 and edges[-1] == 1.0
    values = np.array([0.5, 0.549999, 0.55, 0.7, 0.95, 0.9999, 1.0, 0.3])
    assert bin_numbers(values, edges).tolist() == [0, 0, 1, 4, 9, 9, 9, -1]


def test_report_json_records_the_removals(anchored_run):
    out, report = anchored_run
    section = report["removals"]
    assert section["cluster_rule"] == "anchored"
    assert section["removed"] == report["counts"]["removed"] > 0
    assert section["removed_by_components"] == report["counts"]["removed_by_components"]
    assert section["removed_by_components"] >= section["removed"]
    similarity = section["similarity"]
    assert similarity["total"] == sum(similarity["counts"]) == section["removed"]
    clusters = read(out / "clusters").to_pylist()
    removed = [r["similarity"] for r in clusters if not r["is_representative"]]
    numbers = bin_numbers(np.array(removed), similarity["edges"])
    assert (
        np.bincount(numbers, minlength=len(similarity["counts"])).tolist() == (similarity["counts"])
    )
    sizes = [c["size"] for c in section["largest_clusters"]]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) <= 10 and sizes[0] >= 2


@pytest.fixture(scope="module")
def components_run(spark, corpus, tmp_path_factory):
    root, _ = corpus
    out = tmp_path_factory.mktemp("report_out") / "components"
    report = run(spark, str(root), str(out), build_config(options={"cluster_rule": "components"}))
    return out, report


def test_report_data_and_page_show_them(anchored_run, components_run):
    out, report = anchored_run
    data = report_data(str(out))
    assert data["removals"] == report["removals"]
    pngs = figure_pngs(data)
    assert pngs["removals"].startswith(b"\x89PNG")
    page = render_html(data, pngs)
    assert '<section id="removals">' in page and "removal-similarity" in page
    by_components = f"{report['removals']['removed_by_components']:,}"
    assert "removed by the components rule" in page and by_components in page
    biggest = report["removals"]["largest_clusters"][0]
    assert str(biggest["cluster_id"]) in page
    # A components run: its removals without a similarity histogram, said so.
    components = report_data(str(components_run[0]))
    assert components["removals"]["similarity"] is None
    assert "removals" not in figure_pngs(components)
    page = render_html(components)
    assert '<section id="removals">' in page and "no similarity is recorded" in page
    # A report of an earlier version: no section, no error.
    older = {**components, "removals": None}
    assert '<section id="removals">' not in render_html(older)
