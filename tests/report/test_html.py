"""The report page: self-contained, every section present, texts escaped."""

from __future__ import annotations

import re

from neardup_spark.report.data import report_data
from neardup_spark.report.html import REPORT_HTML, render_html, write_report

SECTIONS = ("summary", "counts", "stages", "similarities", "cluster-sizes", "banding", "clusters")
FAKE_PNGS = dict.fromkeys(("similarities", "cluster_sizes", "banding", "estimates"), b"png")


def test_report_html_is_self_contained_with_every_section(minhash_run, data):
    out, _ = minhash_run
    path = write_report(str(out))
    assert path == str(out / REPORT_HTML)
    page = (out / REPORT_HTML).read_text(encoding="utf-8")
    for section in (*SECTIONS, "estimates"):
        assert f'id="{section}"' in page, section
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    sources = re.findall(r'src="([^"]*)"', page)
    # the figures of FAKE_PNGS's kinds and the removals' (the anchored rule's, the default)
    assert len(sources) == 5 and all(s.startswith("data:image/png;base64,") for s in sources)
    top = data["top_clusters"][0]
    assert f"Cluster {top['cluster_id']}" in page


def test_page_shows_the_counts_and_every_cluster(data):
    page = render_html(data, FAKE_PNGS)
    for name, value in data["counts"].items():
        assert re.search(rf"<th>{name}</th><td class=\"num\">{value:,}</td>", page), name
    assert page.count("<h3>Cluster ") == len(data["top_clusters"])
    shown = sum(c["members_shown"] for c in data["top_clusters"])
    assert page.count("<td class='id'>") == shown


def test_snippets_are_html_escaped(data):
    hostile = {**data, "top_clusters": [dict(c) for c in data["top_clusters"]]}
    first = hostile["top_clusters"][0]
    first["members"] = [dict(m) for m in first["members"]]
    first["members"][0]["snippet"] = '<script>alert("x")</script> & <b>'
    page = render_html(hostile)
    assert "<script>" not in page and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "&amp; &lt;b&gt;" in page


def test_missing_corpus_still_writes_the_report(minhash_run, tmp_path):
    out, _ = minhash_run
    data = report_data(str(out), input_path=str(tmp_path / "no-such-corpus"))
    page = render_html(data)
    assert "Texts unavailable" in page


def test_simhash_page_shows_tables_instead_of_a_curve(simhash_run):
    out, _ = simhash_run
    page = render_html(report_data(str(out)))
    assert 'id="banding"' in page and "SimHash tables" in page and 'id="estimates"' not in page
    assert "SimHash bits from rep." in page
