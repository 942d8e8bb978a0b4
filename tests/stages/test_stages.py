"""Each Spark stage on tiny inline DataFrames (real local Spark)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pyspark.sql import types as T

from neardup_spark.columns import (
    BAND_KEYS,
    CLUSTER_ID,
    COMPONENT,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAS_TEXT,
    IS_REPRESENTATIVE,
    JACCARD,
    N_CHARS,
    N_WORDS,
    NORMALIZED,
    TEXT_IS_NULL,
)
from neardup_spark.config import build_config
from neardup_spark.pipeline.components import connected_components
from neardup_spark.stages.candidates import bucket_members, candidate_pairs
from neardup_spark.stages.clusters import cluster_table, representatives
from neardup_spark.stages.documents import (
    minhash_schema,
    minhash_sketch,
    text_features,
    text_schema,
)
from neardup_spark.stages.exact_copies import exact_copy_edges
from neardup_spark.stages.verify import score_candidate_texts, score_candidates, scored_schema

BASE = " ".join(f"word{i}" for i in range(60))
NEAR = BASE.replace("word30", "changed")


@pytest.fixture(scope="module")
def config():
    return build_config()


@pytest.fixture(scope="module")
def docs(spark):
    rows = [
        ("a", BASE),
        ("b", NEAR),
        ("c", "something else entirely " * 5),
        ("d", None),
        ("e", " ,. "),
        ("f", "two words"),
    ]
    return spark.createDataFrame(rows, "doc_id string, text string")


@pytest.fixture(scope="module")
def fingerprints(docs, config):
    return docs.transform(text_features(config.normalize)).cache()


@pytest.fixture(scope="module")
def sketches(fingerprints, config):
    return fingerprints.transform(minhash_sketch(config)).cache()


def test_fingerprint_stage(fingerprints, spark):
    assert fingerprints.schema == text_schema(T.StringType())
    rows = {r[DOC_ID]: r for r in fingerprints.collect()}
    assert rows["a"][N_WORDS] == 60 and rows["a"][HAS_TEXT] and rows["a"][NORMALIZED] == BASE
    assert rows["d"][TEXT_IS_NULL] and not rows["d"][HAS_TEXT] and rows["d"][N_WORDS] == 0
    assert not rows["e"][TEXT_IS_NULL] and not rows["e"][HAS_TEXT] and rows["e"][NORMALIZED] == ""
    assert rows["f"][N_WORDS] == 2 and rows["f"][N_CHARS] == 9
    assert rows["d"][EXACT_FP] == rows["e"][EXACT_FP] == 0
    assert len({r[EXACT_FP] for r in rows.values()}) == 5


def test_exact_copy_edges_are_a_star_per_group(spark):
    rows = [
        ("c", True, 7),
        ("a", True, 7),
        ("b", True, 7),
        ("x", True, 8),
        ("n1", False, 0),
        ("n2", False, 0),
    ]
    fps = spark.createDataFrame(rows, "doc_id string, has_text boolean, exact_fp long")
    got = sorted(map(tuple, fps.transform(exact_copy_edges()).collect()))
    assert got == [("a", "b"), ("a", "c")]  # documents without text never match


def test_sketch_schema_and_values(sketches, config):
    assert sketches.schema == minhash_schema(T.StringType())
    rows = {r[DOC_ID]: r for r in sketches.collect()}
    assert len(rows["a"][BAND_KEYS]) == config.banding.bands
    assert len(rows["a"]["sketch"]) == 4 * config.num_perm
    assert len(rows["a"]["shingles"]) == 8 * 56
    assert rows["d"][BAND_KEYS] == [] and rows["e"][BAND_KEYS] == []
    assert len(rows["f"]["shingles"]) == 8 and len(rows["f"][BAND_KEYS]) == config.banding.bands


def test_sketch_keeps_integer_ids(spark, config):
    df = spark.createDataFrame([(7, "x y z"), (3, None)], "doc_id long, text string")
    out = df.transform(text_features(config.normalize)).transform(minhash_sketch(config))
    assert out.schema[DOC_ID].dataType == T.LongType()
    assert sorted(r[DOC_ID] for r in out.collect()) == [3, 7]


def test_near_duplicates_share_a_bucket_and_verify(sketches, config):
    pairs = sketches.transform(bucket_members).transform(candidate_pairs(10))
    got = {(r[DOC_A], r[DOC_B]) for r in pairs.collect()}
    assert ("a", "b") in got
    scored = pairs.transform(score_candidates(sketches))
    assert scored.schema == scored_schema(T.StringType())
    row = scored.where((scored[DOC_A] == "a") & (scored[DOC_B] == "b")).first()
    # one changed word of 60 removes 5 of 56 shingles from each side: J = 51 / 61
    assert row[JACCARD] == pytest.approx(51 / 61)
    assert abs(row[ESTIMATE] - 51 / 61) < 0.15


@pytest.mark.parametrize("broadcast", [True, False])
def test_scoring_from_texts_equals_scoring_stored_sets(docs, sketches, config, spark, broadcast):
    every_pair = [(x, y) for x in "abcdef" for y in "abcdef" if x < y]
    pairs = spark.createDataFrame(every_pair, "doc_a string, doc_b string").repartition(3)
    stored = pairs.transform(score_candidates(sketches))
    from_texts = pairs.transform(score_candidate_texts(docs, config, broadcast))
    assert from_texts.schema == scored_schema(T.StringType())
    got = sorted(map(tuple, from_texts.collect()))
    assert got == sorted(map(tuple, stored.collect()))
    assert len(got) == len(every_pair)
    assert dict(((a, b), j) for a, b, j, _ in got)[("a", "b")] == pytest.approx(51 / 61)


def _buckets(spark, members):
    schema = "band_key long, members array<string>"
    return spark.createDataFrame([(i, m) for i, m in enumerate(members)], schema)


def test_small_bucket_emits_all_pairs(spark):
    buckets = _buckets(spark, [["a", "b", "c", "d"]])
    got = sorted((r[DOC_A], r[DOC_B]) for r in buckets.transform(candidate_pairs(10)).collect())
    assert got == [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]


def test_large_bucket_is_linear(spark):
    """50,000 documents in one bucket: 49,999 edges, not 1.25 billion."""
    ids = [f"doc{i:06d}" for i in range(50_000)]
    buckets = _buckets(spark, [ids, ids[:3]])
    pairs = buckets.transform(candidate_pairs(10))
    assert pairs.count() == 49_999 + 1  # star edges; the small bucket's pairs (doc0,doc1..2)
    # plus doc1-doc2 from the small bucket; the star already covers doc0's edges
    assert pairs.where((pairs[DOC_A] == "doc000001") & (pairs[DOC_B] == "doc000002")).count() == 1
    assert pairs.where(pairs[DOC_A] != "doc000000").count() == 1


def union_find_components(edges):
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in list(parent)}


@pytest.mark.parametrize("single_task_max", [0, 10_000], ids=["distributed", "single_task"])
@pytest.mark.parametrize("shape", ["chain", "random", "stars"])
def test_connected_components_match_union_find(spark, shape, single_task_max):
    rng = random.Random(7)
    if shape == "chain":  # a long path: the worst case for label propagation
        edges = [(i + 1, i) for i in range(60)]
    elif shape == "stars":
        edges = [(0, i) for i in range(1, 50)] + [(100, i) for i in range(101, 140)]
    else:
        edges = [(rng.randrange(400), rng.randrange(400)) for _ in range(350)]
    df = spark.createDataFrame(edges, "doc_a long, doc_b long")
    labels, rounds = connected_components(
        df, lambda d: d.localCheckpoint(eager=True), len(edges), single_task_max
    )
    got = {r[DOC_ID]: r[COMPONENT] for r in labels.collect()}
    expected = {k: v for k, v in union_find_components(edges).items()}
    nodes_in_edges = {x for e in edges for x in e if e[0] != e[1]}
    assert got == {k: v for k, v in expected.items() if k in nodes_in_edges}
    assert labels.count() == len(got)  # one row per node
    if single_task_max:
        assert rounds == 0
    elif shape == "chain":
        assert 0 < rounds <= int(np.log2(60)) ** 2


def test_representatives_and_cluster_table(spark):
    labels = spark.createDataFrame(
        [("a", "a"), ("b", "a"), ("c", "a"), ("x", "x"), ("y", "x")],
        "doc_id string, component string",
    )
    lengths = spark.createDataFrame(
        [("a", 5), ("b", 9), ("c", 9), ("x", 3), ("y", 2), ("z", 1)], "doc_id string, n_chars int"
    )
    smallest = labels.transform(representatives("smallest_id", lengths))
    assert {r[DOC_ID]: r[CLUSTER_ID] for r in smallest.collect()}["c"] == "a"
    longest = labels.transform(representatives("longest_text", lengths))
    got = {r[DOC_ID]: r[CLUSTER_ID] for r in longest.collect()}
    assert got == {"a": "b", "b": "b", "c": "b", "x": "x", "y": "x"}  # tie b/c -> smaller id b
    table = lengths.transform(cluster_table(longest))
    rows = {r[DOC_ID]: (r[CLUSTER_ID], r[IS_REPRESENTATIVE]) for r in table.collect()}
    assert rows["z"] == ("z", True)  # singleton
    assert rows["a"] == ("b", False) and rows["b"] == ("b", True)
    assert len(rows) == 6


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["ngram=3", "num_perm=16"],
        ["char_ngram=4", "ngram=7"],
        ["shingle_unit=char"],
        ["normalize.casefold=false", "normalize.collapse_whitespace=false"],
    ],
)
@pytest.mark.parametrize("binary", [False, True])
def test_verification_sets_equal_the_per_document_pass(options, binary):
    """Verification computes only shingles and sketch, and gets what the full pass stores."""
    import pyarrow as pa

    from neardup_spark.batch.documents import documents_columns_fn, shingle_sets_fn
    from neardup_spark.columns import SHINGLES, SKETCH

    config = build_config(overrides=options)
    texts = [
        BASE,
        NEAR,
        None,
        "",
        " ,. ",
        "Caf\u00e9  \u00c9T\u00c9 \u00e0 Paris",
        "東京都の天気は晴れです",
    ]
    if binary:  # raw bytes, one invalid UTF-8 byte each: decoded with replacement
        array = pa.array([t if t is None else t.encode() + b"\xff" for t in texts], pa.binary())
    else:
        array = pa.array(texts, pa.string())
    batch = pa.RecordBatch.from_arrays([pa.array(range(len(texts))), array], ["doc_id", "text"])
    full = documents_columns_fn(config, with_sets=True)(batch)
    shingles, sketches = shingle_sets_fn(config)(array)
    assert shingles.equals(full.column(SHINGLES))
    assert sketches.equals(full.column(SKETCH))
    assert len(shingles[0].as_py()) > 0  # not vacuous: BASE has shingles
