"""Small runs find their pairs on the driver (pipeline/driver_pairs.py): the same clusters,
pairs, deduplicated rows and counts as the Spark stages (each placed explicitly, the run's
recorded plan checked), across verification's blocks of pairs too, and its pieces against
brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.columns import BAND_KEYS, DOC_A, DOC_B, DOC_ID, EXACT_FP, HAS_TEXT, SIMHASH
from neardup_spark.config import build_config
from neardup_spark.pipeline import driver_pairs
from neardup_spark.pipeline.dedupe import dedupe
from neardup_spark.pipeline.reporting import StageTimer
from neardup_spark.quality.generate import generate_corpus
from tests.plans import placed, ran


def test_exact_copy_edges_join_each_copy_to_its_groups_smallest_id():
    docs = pa.table(
        {
            DOC_ID: ["d", "b", "a", "c", "e", "f"],
            HAS_TEXT: [True, True, True, True, False, False],
            EXACT_FP: pa.array([7, 7, 7, 9, 7, 7], pa.int64()),  # e, f: no text, never copies
            "normalized": ["x", "y", "x", "z", None, None],
        }
    )
    edges = driver_pairs.exact_copy_edges(docs)
    assert sorted(zip(edges[DOC_A].to_pylist(), edges[DOC_B].to_pylist(), strict=False)) == [
        ("a", "b"),
        ("a", "d"),
    ]
    # Grouped by the text too: b's text differs (a 64-bit collision), so b stays apart.
    edges = driver_pairs.exact_copy_edges(docs, compare_text=True)
    assert list(zip(edges[DOC_A].to_pylist(), edges[DOC_B].to_pylist(), strict=False)) == [
        ("a", "d")
    ]


def test_candidate_pairs_are_all_pairs_of_small_buckets_and_stars_of_large_ones():
    rng = np.random.default_rng(5)
    ids = [f"doc-{i:02d}" for i in range(30)]
    keys = [sorted(set(rng.integers(0, 12, size=3).tolist())) for _ in ids]
    docs = pa.table({DOC_ID: ids, BAND_KEYS: pa.array(keys, pa.list_(pa.int64()))})
    for top, threads in itertools.product((2, 3, 100), (1, 3)):  # blocks of keys change nothing
        found = driver_pairs.candidate_pairs(docs, top, threads)
        got = set(zip(found[DOC_A].to_pylist(), found[DOC_B].to_pylist(), strict=False))
        assert len(got) == found.num_rows  # distinct
        expected = set()
        for key in range(12):
            members = sorted(i for i, k in zip(ids, keys, strict=False) if key in k)
            if len(members) <= top:
                expected |= set(itertools.combinations(members, 2))
            else:
                expected |= {(members[0], other) for other in members[1:]}
        assert got == expected, top


def test_simhash_pairs_are_kept_by_their_hamming_distance():
    fps = [0, 0b111, -1, -(0b1011 << 59)]
    docs = pa.table(
        {DOC_ID: pa.array([1, 2, 3, 4], pa.int64()), SIMHASH: pa.array(fps, pa.int64())}
    )
    candidates = pa.table(
        {DOC_A: pa.array([1, 1, 1, 2], pa.int64()), DOC_B: pa.array([2, 3, 4, 3], pa.int64())}
    )
    kept = driver_pairs.verified_simhash(candidates, docs, 3)
    distance = {
        (a, b): bin((fps[a - 1] ^ fps[b - 1]) & (2**64 - 1)).count("1")
        for a, b in zip([1, 1, 1, 2], [2, 3, 4, 3], strict=False)
    }
    assert {(a, b): h for a, b, h in zip(*kept.to_pydict().values(), strict=False)} == {
        pair: h for pair, h in distance.items() if h <= 3
    }


@pytest.fixture(scope="module")
def corpus(spark):
    table, _ = generate_corpus(400, seed=23, mean_words=50)
    n = table.num_rows
    texts = table.column("text").to_pylist()
    texts[5], texts[9] = None, ""  # no text: never a copy, never a candidate
    texts[20] = texts[21]  # one more exact copy
    rows = {
        "id": table.column("id").to_pylist(),
        "number": list(range(n, 0, -1)),  # an integer id, in the other order
        "text": texts,
        "source": [f"site-{i % 7}" for i in range(n)],
    }
    return spark.createDataFrame(pa.table(rows).to_pandas())


def outcome(result) -> dict[str, object]:
    pairs = result.pairs.toPandas().sort_values(["doc_a", "doc_b"]).reset_index(drop=True)
    clusters = sorted(tuple(r) for r in result.clusters.collect())
    kept = sorted(tuple(r) for r in result.deduplicated.collect())
    # The API's pairs DataFrame: nullability aside (found here, every column but method is
    # nullable, as pairs/ is written on either path; the Spark stages' cached result declares
    # some not null); the written pairs/ is compared with nullability in test_deduplicated_copy.
    pairs_types = [(f.name, f.dataType) for f in result.pairs.schema]
    schemas = [pairs_types, result.clusters.schema, result.deduplicated.schema]
    counts = {k: v for k, v in result.report["counts"].items()}
    plan = result.report["plan"]
    result.release()
    return {
        "pairs": pairs,
        "clusters": clusters,
        "kept": kept,
        "schemas": schemas,
        "counts": counts,
        "plan": plan,
    }


def compared(df, config) -> tuple[dict, dict, StageTimer, StageTimer]:
    """``df`` deduped with its pairs found here and by the Spark stages (each checked from the
    run's plan): both outcomes, the same, and both timers."""
    driver_timer, spark_timer = StageTimer(), StageTimer()
    driver = outcome(dedupe(df, config, placed(pairs="driver"), timer=driver_timer))
    spark_path = outcome(dedupe(df, config, placed(pairs="spark"), timer=spark_timer))
    ran({"plan": driver["plan"]}, pairs="driver")
    ran({"plan": spark_path["plan"]}, pairs="spark")
    assert driver["pairs"].equals(spark_path["pairs"])
    for key in ("clusters", "kept", "schemas", "counts"):
        assert driver[key] == spark_path[key], key
    return driver, spark_path, driver_timer, spark_timer


CASES = {
    # (the star in large buckets; under the anchored default, their kept members' pairs too)
    "minhash-components-small-buckets": {"bucket_all_pairs_max": 3, "cluster_rule": "components"},
    "minhash-small-buckets": {"bucket_all_pairs_max": 3},
    "minhash-integer-ids-no-exact-first": {"id_col": "number", "exact_first": False},
    "minhash-compare-text-boilerplate": {"exact_compare_text": True, "strip_boilerplate": True},
    "simhash": {"method": "simhash"},
    "exact": {"method": "exact", "id_col": "number"},
}


@pytest.mark.parametrize("case", CASES)
def test_the_driver_finds_the_spark_stages_pairs(spark, corpus, case):
    on_driver = build_config(options=CASES[case])
    driver, spark_path, driver_timer, spark_timer = compared(corpus, on_driver)
    if on_driver.method == "minhash":  # the Spark stages' texts: the cleaned ones, or broadcast
        texts = "cleaned" if on_driver.strip_boilerplate else "broadcast"
        ran({"plan": spark_path["plan"]}, verify_texts=texts)
    assert driver["counts"]["verified_pairs"] > 0
    if on_driver.method != "exact":
        assert driver["counts"]["candidate_pairs"] > 0
    assert driver_timer.seconds.keys() == spark_timer.seconds.keys()
    pair_stages = ["candidates", "verify"] if on_driver.method != "exact" else []
    if on_driver.method == "exact" or on_driver.exact_first:
        pair_stages.insert(0, "exact")
    members_here = not on_driver.prefer and on_driver.representative == "smallest_id"
    assert driver_timer.on_driver == pair_stages + ["components"] * members_here
    assert spark_timer.on_driver == []


def test_verification_across_its_blocks_of_pairs_equals_the_spark_stages(spark):
    """More candidate pairs than one block of the driver's verification scores at once
    (``_PAIRS_PER_BLOCK``): clusters of ten near-duplicates each, every pair of a cluster a
    candidate, some below the threshold. The same pairs and clusters as the Spark stages."""
    block = driver_pairs._PAIRS_PER_BLOCK
    assert block == 2048
    bases, _ = generate_corpus(120, seed=41, mean_words=300)
    rng = np.random.default_rng(41)
    ids, texts = [], []
    for n, base in enumerate(bases.column("text").to_pylist()):
        words = base.split()
        for variant in range(10):  # the base, then 1, 2, ... 9 words replaced
            changed = list(words)
            for at in rng.choice(len(words), size=variant, replace=False):
                changed[at] = f"other{n}x{variant}x{at}"
            ids.append(f"doc-{n:03d}-{variant}")
            texts.append(" ".join(changed))
    df = spark.createDataFrame(pa.table({"id": ids, "text": texts}).to_pandas())
    driver, _, _, _ = compared(df, build_config())
    counts = driver["counts"]
    assert counts["candidate_pairs"] > block
    assert 0 < counts["near_pairs"] < counts["candidate_pairs"]
