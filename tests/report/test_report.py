"""The run report: the data behind each figure, checked against the run's own outputs, and the
page itself (self-contained, every section present)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque

import numpy as np
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.cli import main
from neardup_spark.config import build_config
from neardup_spark.io.finished import config_of_run
from neardup_spark.kernels.lsh import candidate_probability
from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.explain import explain
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.report.html import (
    MAX_MEMBERS,
    REPORT_HTML,
    render_html,
    report_data,
    write_report,
)

SECTIONS = ("summary", "counts", "stages", "similarities", "cluster-sizes", "banding", "clusters")


def shingles(text: str | None, k: int = 5) -> set[tuple[str, ...]]:
    """Independent brute force: normalise, split, k-word tuples (short docs: one shingle)."""
    words = (normalize_text(text) or "").split() if text is not None else []
    if not words:
        return set()
    if len(words) < k:
        return {tuple(words)}
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def brute_jaccard(x: str | None, y: str | None) -> float:
    a, b = shingles(x), shingles(y)
    return len(a & b) / len(a | b) if a | b else 0.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    table, _ = generate_corpus(800, seed=7, mean_words=150)
    root = tmp_path_factory.mktemp("report_corpus")
    pq.write_table(table.slice(0, 400), root / "part-0.parquet")
    pq.write_table(table.slice(400), root / "part-1.parquet")
    texts = dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))
    return root, texts


@pytest.fixture(scope="module")
def minhash_run(spark, corpus, tmp_path_factory):
    root, _ = corpus
    out = tmp_path_factory.mktemp("report_out") / "minhash"
    report = run(spark, str(root), str(out), build_config())
    return out, report


@pytest.fixture(scope="module")
def data(minhash_run):
    out, _ = minhash_run
    return report_data(str(out))


@pytest.fixture(scope="module")
def tables(minhash_run):
    out, _ = minhash_run
    pairs = ds.dataset(str(out / "pairs")).to_table().to_pylist()
    clusters = ds.dataset(str(out / "clusters")).to_table().to_pylist()
    return pairs, clusters


def test_histogram_counts_every_pair_once_by_method(data, tables, minhash_run):
    _, report = minhash_run
    pairs, _ = tables
    hist = data["similarity_histogram"]
    assert len(hist["edges"]) == sum(1 for _ in hist["counts"]["minhash"]) + 1
    assert hist["total"] == len(pairs) == report["counts"]["verified_pairs"]
    assert sum(sum(c) for c in hist["counts"].values()) == len(pairs)
    by_method = Counter(p["method"] for p in pairs)
    assert {k: sum(v) for k, v in hist["counts"].items()} == dict(by_method)
    assert sum(hist["counts"]["exact"]) == report["counts"]["exact_copies"] > 0
    assert hist["counts"]["exact"][-1] == report["counts"]["exact_copies"]  # all at 1.0
    assert hist["threshold"] == 0.8 and hist["edges"][0] < 0.8 and hist["edges"][-1] == 1.0
    # Recount with the histogram's own edges.
    edges = np.asarray(hist["edges"])
    sims = np.array([p["similarity"] for p in pairs if p["method"] == "minhash"])
    assert hist["counts"]["minhash"] == np.histogram(sims, bins=edges)[0].tolist()


def test_cluster_size_distribution_matches_clusters_table(data, tables, minhash_run):
    _, report = minhash_run
    _, clusters = tables
    sizes = Counter(Counter(c["cluster_id"] for c in clusters).values())
    dist = data["cluster_sizes"]
    assert dict(zip(dist["sizes"], dist["clusters"], strict=True)) == dict(sizes)
    assert sum(dist["clusters"]) == dist["total_clusters"] == report["counts"]["clusters"]
    assert sum(dist["documents"]) == report["counts"]["input_rows"] == 800
    assert dist["largest"] == max(sizes)


def test_curve_is_the_candidate_probability_at_the_runs_banding(data, minhash_run):
    _, report = minhash_run
    banding = data["banding"]
    assert (banding["bands"], banding["rows"]) == (
        report["banding"]["bands"],
        report["banding"]["rows"],
    )
    js = np.asarray(banding["jaccard"])
    assert js[0] == 0.0 and js[-1] == 1.0
    expected = candidate_probability(js, banding["bands"], banding["rows"])
    np.testing.assert_allclose(banding["probability"], expected, rtol=0, atol=1e-15)
    assert banding["probability_at_threshold"] == pytest.approx(
        report["banding"]["probability_at_threshold"], abs=1e-6
    )
    assert data["simhash"] is None


def test_scatter_points_are_the_verified_minhash_pairs(data, tables):
    pairs, _ = tables
    est = data["estimates"]
    minhash = [p for p in pairs if p["method"] == "minhash"]
    assert est["pairs"] == len(minhash) == len(est["jaccard"]) == len(est["estimate"])
    assert not est["sampled"]
    expected = sorted((p["jaccard"], p["estimate"]) for p in minhash)
    assert sorted(zip(est["jaccard"], est["estimate"], strict=True)) == expected
    assert all(j >= 0.8 for j in est["jaccard"])
    assert est["within_2se"] > 0.8


def test_top_clusters_ordered_by_size_with_their_members(data, tables, corpus):
    pairs, clusters = tables
    _, texts = corpus
    members = defaultdict(set)
    for c in clusters:
        members[c["cluster_id"]].add(c["doc_id"])
    top = data["top_clusters"]
    assert 0 < len(top) <= 10
    ranked = sorted(
        ((-len(m), cid) for cid, m in members.items() if len(m) > 1),
    )[: len(top)]
    assert [(c["cluster_id"], c["size"]) for c in top] == [(cid, -neg) for neg, cid in ranked]
    links = {(p["doc_a"], p["doc_b"]): p["similarity"] for p in pairs}
    for cluster in top:
        shown = cluster["members"]
        rep = shown[0]
        assert rep["doc_id"] == cluster["cluster_id"] and rep["is_representative"]
        assert rep["hops"] == 0 and rep["jaccard_to_representative"] == pytest.approx(1.0)
        ids = [m["doc_id"] for m in shown]
        assert len(set(ids)) == len(ids)
        if cluster["size"] <= MAX_MEMBERS:
            assert set(ids) == members[cluster["cluster_id"]]
        for m in shown:
            expected = brute_jaccard(texts[rep["doc_id"]], texts[m["doc_id"]])
            assert m["jaccard_to_representative"] == pytest.approx(expected, abs=1e-12)
            assert m["snippet"] is not None and len(m["snippet"]) <= 201
            assert " ".join(texts[m["doc_id"]].split()).startswith(m["snippet"].rstrip("…"))
            if m["hops"] > 0:  # reached over a verified pair of pairs/
                key = tuple(sorted((m["doc_id"], m["linked_to"])))
                assert links[key] == pytest.approx(m["link_similarity"])
        # Breadth-first: hops never decrease along the list.
        hops = [m["hops"] for m in shown]
        assert hops == sorted(hops)
        below = [m for m in shown[1:] if m["jaccard_to_representative"] < 0.8]
        assert [m["below_threshold"] for m in shown[1:]] == [
            m["jaccard_to_representative"] < 0.8 for m in shown[1:]
        ]
        assert cluster["chained_members"] == len(below)
        for m in below:  # a chain: not a direct neighbour of the representative
            assert m["hops"] >= 2 or m["link_similarity"] is None


def test_hops_are_shortest_paths(data, tables):
    pairs, _ = tables
    graph = defaultdict(set)
    for p in pairs:
        graph[p["doc_a"]].add(p["doc_b"])
        graph[p["doc_b"]].add(p["doc_a"])
    for cluster in data["top_clusters"]:
        start = cluster["cluster_id"]
        dist = {start: 0}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for other in graph[node]:
                if other not in dist:
                    dist[other] = dist[node] + 1
                    queue.append(other)
        for m in cluster["members"]:
            assert m["hops"] == dist[m["doc_id"]]


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
    assert len(sources) == 4 and all(s.startswith("data:image/png;base64,") for s in sources)
    top = data["top_clusters"][0]
    assert f"Cluster {top['cluster_id']}" in page


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
    gone = str(tmp_path / "no-such-corpus")
    data = report_data(str(out), input_path=gone)
    assert data["corpus"]["available"] is False and data["corpus"]["problem"]
    assert all(m["snippet"] is None for c in data["top_clusters"] for m in c["members"])
    page = render_html(data)
    assert "Texts unavailable" in page


def test_cli_prints_the_path_and_maps_errors(minhash_run, tmp_path, capsys):
    out, _ = minhash_run
    assert main(["report", str(out), "--top", "3", "--max-members", "5"]) == 0
    assert capsys.readouterr().out.strip() == str(out / REPORT_HTML)
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "report.json" in capsys.readouterr().err


def test_explain_agrees_with_the_job_on_its_pairs(minhash_run, corpus, tables):
    out, _ = minhash_run
    root, _ = corpus
    pairs, _ = tables
    config = config_of_run(str(out))
    for p in [p for p in pairs if p["method"] == "minhash"][:5]:
        result = explain(str(root), p["doc_a"], p["doc_b"], config)
        assert result["jaccard"] == pytest.approx(p["jaccard"], abs=1e-12)
        assert result["minhash"]["estimate"] == pytest.approx(p["estimate"], abs=1e-12)
        assert result["minhash"]["matched_bands"]
        assert result["verdict"] == "candidate and verified"


@pytest.fixture(scope="module")
def simhash_run(spark, corpus, tmp_path_factory):
    root, _ = corpus
    out = tmp_path_factory.mktemp("report_out") / "simhash"
    report = run(spark, str(root), str(out), build_config(options={"method": "simhash"}))
    return out, report


def test_simhash_run_shows_tables_instead_of_a_curve(simhash_run):
    out, report = simhash_run
    data = report_data(str(out))
    assert data["banding"] is None and data["estimates"] is None
    assert data["simhash"]["tables"] == report["simhash"]["tables"] == 20
    assert sum(data["hamming_counts"].values()) == report["counts"]["near_pairs"]
    assert max(data["hamming_counts"]) <= 3
    hist = data["similarity_histogram"]
    assert sum(sum(c) for c in hist["counts"].values()) == report["counts"]["verified_pairs"]
    assert hist["threshold"] == pytest.approx(np.cos(np.pi * 3 / 64))
    page = render_html(data)
    assert 'id="banding"' in page and "SimHash tables" in page and 'id="estimates"' not in page
    for cluster in data["top_clusters"]:
        for m in cluster["members"]:
            assert m["hamming_to_representative"] is not None
            assert m["below_threshold"] == (m["hamming_to_representative"] > 3)
        assert cluster["chained_members"] == sum(m["below_threshold"] for m in cluster["members"])
