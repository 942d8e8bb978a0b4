"""``--similarity containment`` end to end, on documents that grow version by version and
excerpts quoted inside longer articles (up to 1:20 in size): the pairs contained at the threshold
are found (recall against the exact oracle over every pair), every pair is verified (its
containment the oracle's), every removed document is contained in the document kept in its place
and no larger than it, no two kept documents contain each other, and every path gives the same
outputs."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import ExecutionSettings, build_config
from neardup_spark.errors import UserError
from neardup_spark.pipeline.dedupe import dedupe
from neardup_spark.quality.oracle import shingle_matrix
from tests.plans import placed, ran
from tests.revisions import growing_documents

THRESHOLD = 0.8
# (the single task's path is the Jaccard runs' tests')
PLACES = {
    "driver": placed(components="driver"),
    "distributed": ExecutionSettings(
        plan={"pairs": "spark", "components": "distributed"}, components_single_task_max_edges=0
    ),
}


@pytest.fixture(scope="module")
def growing(tmp_path_factory):
    root = tmp_path_factory.mktemp("growing")
    corpus = growing_documents(threads=20, versions=10, quotes=40, unrelated=120, seed=7)
    pq.write_table(corpus, root / "part-0.parquet")
    return root, corpus


@pytest.fixture(scope="module")
def oracle(growing):
    """Every pair's containment of the smaller set in the larger, and the sets' sizes."""
    _, corpus = growing
    config = build_config()
    matrix = shingle_matrix(corpus.column("text"), config.ngram, config.seed, config.normalize)
    n = len(matrix)
    i, j = np.triu_indices(n, 1)
    inter = matrix.intersections(i, j)
    smaller = np.minimum(matrix.sizes[i], matrix.sizes[j])
    contained = np.divide(inter, smaller, out=np.zeros(i.size), where=smaller > 0)
    ids = corpus.column("id").to_pylist()
    return ids, matrix.sizes, {(ids[a], ids[b]): c for a, b, c in zip(i, j, contained, strict=True)}


def containment_of(oracle, a: str, b: str) -> float:
    _, _, pairs = oracle
    return pairs[(a, b)] if (a, b) in pairs else pairs[(b, a)]


@pytest.fixture(scope="module")
def runs(spark, growing):
    root, _ = growing
    config = build_config(options={"similarity": "containment"})
    found = {}
    for name, execution in PLACES.items():
        result = dedupe(spark.read.parquet(str(root)), config, execution)
        ran(result.report, components=name)
        members = {
            r["doc_id"]: (r["cluster_id"], r["similarity"]) for r in result.clusters.collect()
        }
        pairs = sorted(
            (p["doc_a"], p["doc_b"], p["method"], round(p["similarity"], 12), p["containment"])
            for p in result.pairs.collect()
        )
        found[name] = (members, pairs, result.report)
        result.release()
    return found


def test_every_path_gives_the_same_outputs(runs):
    members, pairs, _ = runs["driver"]
    assert runs["distributed"][:2] == (members, pairs)


def test_contained_pairs_are_found_and_verified(runs, oracle):
    ids, sizes, every = oracle
    at = {doc: k for k, doc in enumerate(ids)}
    _, pairs, report = runs["driver"]
    assert report["banding"]["rows"] == 1 and report["banding"]["bands"] == 200
    ratio = {
        key: max(sizes[at[key[0]]], sizes[at[key[1]]])
        / max(1, min(sizes[at[key[0]]], sizes[at[key[1]]]))
        for key in every
    }
    truth = {key for key, c in every.items() if c >= THRESHOLD and ratio[key] <= 20}
    assert len(truth) > 300
    assert max(ratio[key] for key in truth) > 8  # far apart in size: Jaccard would miss them
    found = {(a, b) for a, b, method, _, _ in pairs if method == "minhash"}
    assert len(found & truth) >= 0.99 * len(truth)
    for a, b, method, similarity, contained in pairs:
        assert a < b  # the output contract, whatever the keep order
        assert similarity == round(contained, 12)
        if method == "minhash":
            assert contained == pytest.approx(containment_of(oracle, a, b), abs=1e-12)
            assert contained >= THRESHOLD


def test_every_removed_document_is_contained_in_its_kept_one(runs, oracle):
    ids, sizes, every = oracle
    at = {doc: k for k, doc in enumerate(ids)}
    members, _, report = runs["driver"]
    removed = {d: kept for d, (kept, _) in members.items() if d != kept}
    assert len(removed) == report["counts"]["removed"] > 150
    for doc, kept in removed.items():
        assert containment_of(oracle, doc, kept) >= THRESHOLD, (doc, kept)
        assert sizes[at[doc]] <= sizes[at[kept]], (doc, kept)  # the container is kept
        assert members[doc][1] == pytest.approx(containment_of(oracle, doc, kept))
    kept_docs = set(ids) - set(removed)
    near = [k for k, c in every.items() if c >= THRESHOLD + 0.05 and set(k) <= kept_docs]
    assert not near
    # a growing thread's last (largest) version is never removed for one of its earlier ones
    for thread in range(20):
        last = f"g{thread:03d}v9"
        assert last in kept_docs or not removed[last].startswith(f"g{thread:03d}")


def test_containment_needs_minhash_and_the_anchored_rule():
    with pytest.raises(UserError, match="minhash"):
        build_config(options={"similarity": "containment", "method": "simhash"})
    with pytest.raises(UserError, match="anchored"):
        build_config(options={"similarity": "containment", "cluster_rule": "components"})
    with pytest.raises(UserError, match="similarity"):
        build_config(options={"similarity": "cosine"})
