"""The anchored rule (the default) end to end, on chains of revised documents: every
implementation of the components step gives the same clusters and pairs; every removal is
justified by an exact Jaccard >= the threshold with the kept document; no two kept documents are
near-duplicates; the kept set is the sequential greedy's; the components rule still gives
connected components over the same pairs."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import ExecutionSettings, build_config
from neardup_spark.pipeline.dedupe import dedupe
from neardup_spark.quality.oracle import shingle_matrix, similar_pairs
from tests.plans import placed, ran
from tests.revisions import revision_chains

THRESHOLD = 0.8
PLACES = {
    "driver": placed(components="driver"),
    "single_task": placed(pairs="spark", components="single_task"),
    # documents decided in rounds of Spark jobs until 100 edges are left, one task the rest
    "distributed": ExecutionSettings(
        plan={"components": "distributed"}, components_single_task_max_edges=100
    ),
}


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    root = tmp_path_factory.mktemp("chains")
    corpus = revision_chains(chains=40, versions=8, unrelated=80, seed=3)
    pq.write_table(corpus, root / "part-0.parquet")
    return root, corpus


def outcome(result) -> tuple[dict, list]:
    members = {r["doc_id"]: r for r in result.clusters.collect()}
    pairs = sorted(
        (p["doc_a"], p["doc_b"], p["method"], round(p["jaccard"], 12))
        for p in result.pairs.collect()
    )
    return members, pairs


@pytest.fixture(scope="module")
def runs(spark, chains):
    root, _ = chains
    found, rounds = {}, {}
    for prefer in (None, "night desc"):
        for name, execution in PLACES.items():
            config = build_config(options={"prefer": prefer} if prefer else None)
            result = dedupe(spark.read.parquet(str(root)), config, execution)
            ran(result.report, components=name)
            assert result.report["cluster_rule"] == "anchored"
            found[prefer, name] = (outcome(result), result.report["counts"])
            rounds[prefer, name] = result.report["components"].get("greedy_rounds")
            result.release()
    # Rounds decided documents, one task the rest (every document in rounds, and a bound on
    # them: tests/pipeline/test_anchored_rounds.py).
    assert all(rounds[prefer, "distributed"] >= 1 for prefer in (None, "night desc")), rounds
    return found


def test_every_implementation_gives_the_same_clusters_and_pairs(runs):
    for prefer in (None, "night desc"):
        driver = runs[prefer, "driver"]
        for name in ("single_task", "distributed"):
            assert runs[prefer, name] == driver, (prefer, name)


@pytest.mark.parametrize("prefer", [None, "night desc"])
def test_every_removal_is_justified_and_no_two_kept_are_near(runs, chains, prefer):
    _, corpus = chains
    (members, pairs), counts = runs[prefer, "driver"]
    ids = corpus.column("id").to_pylist()
    at = {doc: i for i, doc in enumerate(ids)}
    config = build_config()
    matrix = shingle_matrix(corpus.column("text"), config.ngram, config.seed, config.normalize)
    i, j, _ = similar_pairs(matrix, THRESHOLD)
    truth = {(ids[a], ids[b]) for a, b in zip(i, j, strict=True)}
    truth |= {(b, a) for a, b in truth}
    removed = [d for d, r in members.items() if r["cluster_id"] != d]
    assert len(removed) == counts["removed"] > 100
    kept_of = {d: members[d]["cluster_id"] for d in removed}
    exact = matrix.jaccard(
        np.array([at[d] for d in removed]), np.array([at[kept_of[d]] for d in removed])
    )
    assert exact.min() >= THRESHOLD  # share 1.000
    assert np.allclose([members[d]["similarity"] for d in removed], exact)
    kept = {d for d in ids if d not in kept_of}
    assert not [(a, b) for a, b in truth if a in kept and b in kept]
    # The components rule over the same pairs would remove more: the chains hold them together.
    assert counts["removed_by_components"] > counts["removed"]
    # The kept set is the sequential greedy's over the verified pairs, in keep order.
    night = dict(zip(ids, corpus.column("night").to_pylist(), strict=True))
    order = sorted(ids, key=lambda d: ((-night[d] if prefer else 0), d))
    near = {(a, b) for a, b, _, _ in pairs} | {(b, a) for a, b, _, _ in pairs}
    greedy: list[str] = []
    for doc in order:
        if not any((doc, k) in near for k in greedy):
            greedy.append(doc)
    assert set(greedy) == kept


def test_the_components_rule_keeps_its_transitive_clusters(spark, chains, runs):
    root, _ = chains
    config = build_config(options={"cluster_rule": "components"})
    result = dedupe(spark.read.parquet(str(root)), config)
    assert result.report["cluster_rule"] == "components"
    members = {r["doc_id"]: r["cluster_id"] for r in result.clusters.collect()}
    pairs = [(p["doc_a"], p["doc_b"]) for p in result.pairs.collect()]
    result.release()
    (_, anchored_pairs), counts = runs[None, "driver"]
    assert sorted(pairs) == sorted((a, b) for a, b, _, _ in anchored_pairs)
    removed = sum(1 for d, c in members.items() if d != c)
    assert removed == counts["removed_by_components"]
    for a, b in pairs:  # every pair inside one cluster
        assert members[a] == members[b]
