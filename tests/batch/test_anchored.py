"""The anchored rule on an Arrow table of whole components: the sequential greedy over the
documents (exact copies pairs of similarity 1), and every removal justified by a pair."""

from __future__ import annotations

import itertools

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup_spark.batch.anchored import CONTENT, anchored_members
from neardup_spark.columns import CLUSTER_ID, DOC_A, DOC_B, DOC_ID, SIMILARITY


def edge_table(pairs: list[tuple[str, str, float]]) -> pa.Table:
    return pa.table(
        {
            DOC_A: pa.array([a for a, _, _ in pairs], pa.string()),
            DOC_B: pa.array([b for _, b, _ in pairs], pa.string()),
            "method": pa.array(["minhash"] * len(pairs), pa.string()),
            "similarity": pa.array([s for _, _, s in pairs], pa.float64()),
            "jaccard": pa.array([s for _, _, s in pairs], pa.float64()),
            "estimate": pa.array([s for _, _, s in pairs], pa.float64()),
            "hamming": pa.nulls(len(pairs), pa.int32()),
        }
    )


def brute_force(order: list[str], similar: dict[frozenset, float]) -> dict[str, tuple[str, float]]:
    kept: list[str] = []
    out = {}
    for doc in order:
        first = next((k for k in kept if frozenset((doc, k)) in similar), None)
        if first is None:
            kept.append(doc)
            out[doc] = (doc, 1.0)
        else:
            out[doc] = (first, similar[frozenset((doc, first))])
    return out


@st.composite
def corpora(draw):
    """Documents in exact-copy groups (named by their smallest id), near edges between groups,
    and a keep key per document."""
    n = draw(st.integers(1, 14))
    ids = [f"d{i:02d}" for i in range(n)]
    group = draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n))
    groups: dict[int, list[str]] = {}
    for doc, g in zip(ids, group, strict=True):
        groups.setdefault(g, []).append(doc)
    names = {g: min(docs) for g, docs in groups.items()}
    content = {doc: names[g] for doc, g in zip(ids, group, strict=True)}
    contents = sorted(set(content.values()))
    candidates = list(itertools.combinations(contents, 2))
    near = draw(st.lists(st.sampled_from(candidates), unique=True) if candidates else st.just([]))
    sims = [draw(st.floats(0.8, 0.99)) for _ in near]
    keys = draw(st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=n, max_size=n))
    edges = [(a, b, s) for (a, b), s in zip(near, sims, strict=True)]
    return ids, content, edges, keys


@settings(max_examples=300, deadline=None)
@given(corpora())
def test_the_rule_is_the_greedy_over_documents(corpus):
    ids, content, near, keys = corpus
    docs = pa.table(
        {
            DOC_ID: pa.array(ids),
            CONTENT: pa.array([content[d] for d in ids]),
            "quality": pa.array(keys, pa.int64()),
        }
    )
    members, added = anchored_members(docs, edge_table(near), [("quality", True)])
    # The greedy over documents: keep order by quality desc (nulls last), then id.
    order = sorted(ids, key=lambda d: (keys[ids.index(d)] is None, -(keys[ids.index(d)] or 0), d))
    similar: dict[frozenset, float] = {}
    for a, b in itertools.combinations(ids, 2):
        if content[a] == content[b]:
            similar[frozenset((a, b))] = 1.0
    for a, b, s in near:
        for x in ids:
            for y in ids:
                if content[x] == a and content[y] == b:
                    similar[frozenset((x, y))] = s
    expected = brute_force(order, similar)
    got = dict(
        zip(
            members.column(DOC_ID).to_pylist(),
            zip(
                members.column(CLUSTER_ID).to_pylist(),
                members.column(SIMILARITY).to_pylist(),
                strict=True,
            ),
            strict=True,
        )
    )
    assert got == expected
    # Every removal in pairs/: the input's exact edges (group's smallest id to each copy), its
    # near edges, and the rows added.
    pairs = {(min(d, c), max(d, c)) for d, c in content.items() if d != c}
    pairs |= {(a, b) for a, b, _ in near}
    new = list(zip(added.column(DOC_A).to_pylist(), added.column(DOC_B).to_pylist(), strict=True))
    assert len(set(new)) == len(new) and not set(new) & pairs  # no pair twice in pairs/
    pairs |= set(new)
    assert all(
        a < b
        for a, b in zip(
            added.column(DOC_A).to_pylist(), added.column(DOC_B).to_pylist(), strict=True
        )
    )
    for doc, (kept, _) in got.items():
        if doc != kept:
            assert (min(doc, kept), max(doc, kept)) in pairs, (doc, kept)


def test_a_chain_of_revisions_and_a_preferred_copy():
    """a ~ b ~ c (a chain), c has a copy c2 preferred by the keys: a kept, b removed for a, c's
    group kept through c2 (its copy c anchored to it, exactly)."""
    docs = pa.table(
        {
            DOC_ID: ["a", "b", "c", "c2"],
            CONTENT: ["a", "b", "c", "c"],
            "quality": [3, 2, 0, 1],
        }
    )
    members, added = anchored_members(
        docs, edge_table([("a", "b", 0.9), ("b", "c", 0.85)]), [("quality", True)]
    )
    got = {r[DOC_ID]: (r[CLUSTER_ID], r[SIMILARITY]) for r in members.to_pylist()}
    assert got == {"a": ("a", 1.0), "b": ("a", 0.9), "c2": ("c2", 1.0), "c": ("c2", 1.0)}
    # c's exact pair with c2 is its group's (c is the smallest id), b's pair with a the near
    # edge: nothing to add.
    assert added.num_rows == 0


def test_large_bucket_pairs_keep_doc_a_before_doc_b_under_containment():
    """Under containment a bucket's members go largest first: its pairs still name the
    smaller id first (the output contract), so no pair is listed twice."""
    import numpy as np

    from neardup_spark.batch.bucket_kept import kept_pairs
    from neardup_spark.config import build_config

    sketch = np.arange(200, dtype=np.uint32).tobytes()
    members = pa.table(
        {
            "band_key": pa.array([7, 7, 7], pa.int64()),
            "doc_id": ["a", "b", "c"],
            "sketch": pa.array([sketch] * 3, pa.binary()),
            "n_shingles": pa.array([10, 50, 30], pa.int32()),  # "b" the largest: kept first
        }
    )
    config = build_config(options={"similarity": "containment"})
    pairs, _, _ = kept_pairs(members, config)
    doc_a, doc_b = pairs.column("doc_a").to_pylist(), pairs.column("doc_b").to_pylist()
    rows = list(zip(doc_a, doc_b, strict=True))
    assert sorted(rows) == [("a", "b"), ("b", "c")]
