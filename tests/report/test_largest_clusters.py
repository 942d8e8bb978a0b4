"""The largest clusters as report.html shows them: members in breadth-first order along the
verified pairs, each with its exact Jaccard to the representative."""

from __future__ import annotations

from collections import defaultdict, deque

import pyarrow as pa
import pytest

from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.report.data import MAX_MEMBERS
from neardup_spark.report.largest_clusters import (
    below_threshold,
    bfs_order,
    cluster_members,
    read_texts,
    resolve_corpus,
    snippet,
)


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


def test_bfs_order_by_hand():
    # r - a (0.9), r - b (0.95), a - c (0.85), c - d (0.99); e unreachable; x outside.
    links: dict = defaultdict(list)
    for u, v, s in [("r", "a", 0.9), ("r", "b", 0.95), ("a", "c", 0.85), ("c", "d", 0.99)]:
        links[u].append((v, s))
        links[v].append((u, s))
    links["r"].append(("x", 1.0))
    members = {"r", "a", "b", "c", "d", "e"}
    order = bfs_order("r", members, links, limit=10)
    assert order == [
        ("r", None, None, 0),
        ("b", "r", 0.95, 1),  # the strongest link first
        ("a", "r", 0.9, 1),
        ("c", "a", 0.85, 2),
        ("d", "c", 0.99, 3),
        ("e", None, None, -1),  # not reached over pairs: last, hops -1
    ]
    assert [m for m, *_ in bfs_order("r", members, links, limit=3)] == ["r", "b", "a"]


def test_cluster_members_of_the_top_table():
    removed = pa.table({"doc_id": ["b", "c", "e", "g"], "cluster_id": ["a", "a", "d", "f"]})
    top = pa.table({"cluster_id": ["a", "d"], "size": [3, 2]})
    assert cluster_members(removed, top) == {"a": {"a", "b", "c"}, "d": {"d", "e"}}


def test_snippet_flattens_and_cuts():
    assert snippet(None) is None
    assert snippet("  two\n words ") == "two words"
    assert snippet("abc def ghi", chars=6) == "abc de…"
    assert snippet("abc  def", chars=4) == "abc…"  # no space before the ellipsis


def test_below_threshold_by_method():
    config = {"threshold": 0.8, "hamming_k": 3}
    assert below_threshold(config, "minhash", 0.79, None) is True
    assert below_threshold(config, "minhash", 0.8, None) is False
    assert below_threshold(config, "simhash", 0.1, 4) is True
    assert below_threshold(config, "simhash", 0.1, 3) is False
    assert below_threshold(config, "exact", 0.99, None) is True
    assert below_threshold(config, "minhash", None, None) is None


def test_resolve_corpus(tmp_path, monkeypatch):
    out = tmp_path / "runs" / "out"
    (tmp_path / "runs" / "corpus").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert resolve_corpus({"input": "x"}, str(out), "given") == "given"
    assert resolve_corpus({}, str(out), None) is None
    # A relative input that is not here but next to the output (a run started elsewhere).
    assert resolve_corpus({"input": "corpus"}, str(out), None) == str(tmp_path / "runs" / "corpus")
    assert resolve_corpus({"input": "s3a://b/c"}, str(out), None) == "s3a://b/c"
    assert resolve_corpus({"input": "nowhere"}, str(out), None) == "nowhere"


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


@pytest.mark.parametrize("name", ["corpus.csv", "corpus.jsonl.gz", "corpus.orc", "corpus"])
def test_the_texts_come_from_a_corpus_in_any_input_format(tmp_path, name):
    """report.html's texts come from the run's corpus, which ``neardup dedupe`` may have read as
    CSV, JSON lines or ORC (a CSV corpus gave "cannot read corpus ... as Parquet" and no text);
    a directory says its format by its files' names."""
    import gzip
    import json

    import pyarrow.csv as pacsv
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    table = pa.table({"id": [3, 1, 2], "text": ["three", 'one, "quoted"\nover two lines', None]})
    path = tmp_path / name
    if name.endswith(".csv"):
        pacsv.write_csv(table, path)
    elif name.endswith(".jsonl.gz"):
        with gzip.open(path, "wt") as out:
            out.writelines(json.dumps(row) + "\n" for row in table.to_pylist())
    elif name.endswith(".orc"):
        orc.write_table(table, path)
    else:
        path.mkdir()
        pq.write_table(table, path / "part-0.parquet")
    assert read_texts(str(path), "id", "text", [1, 2]) == (
        {1: 'one, "quoted"\nover two lines', 2: None},
        None,
    )
