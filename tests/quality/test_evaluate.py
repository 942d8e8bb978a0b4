"""The evaluator (no Spark): metrics against independent pure-Python brute force.

A corpus of ~60 documents with planted near-duplicates is shingled in pure Python (word
5-tuples of ``normalize_text``), every pair compared in a double loop, and a fake OUTPUT
(clusters/, pairs/, report.json) with deliberate mistakes is scored both ways.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.cli import main
from neardup_spark.errors import UserError
from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.quality.evaluate import (
    BANDS,
    LABELLED_ENV,
    adjusted_rand_index,
    band_of,
    clustering_agreement,
    default_labelled_dir,
    evaluate,
    evaluate_labelled,
    format_table,
    prefix_matrix,
    shingle_matrix,
    similar_pairs,
    text_pair_jaccard,
)

K = 5
THRESHOLD = 0.8


# ------------------------------------------------------------------------------------------
# Pure-Python brute force


def shingle_set(text: str | None, k: int = K) -> frozenset[tuple[str, ...]]:
    norm = normalize_text(text)
    words = norm.split() if norm else []
    if not words:
        return frozenset()
    if len(words) < k:
        return frozenset({tuple(words)})
    return frozenset(tuple(words[i : i + k]) for i in range(len(words) - k + 1))


def brute_jaccard(a: frozenset, b: frozenset) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def brute_all_pairs(texts: list[str | None]) -> dict[tuple[int, int], float]:
    sets = [shingle_set(t) for t in texts]
    return {
        (i, j): brute_jaccard(sets[i], sets[j])
        for i in range(len(texts))
        for j in range(i + 1, len(texts))
    }


def brute_ari(pred: list[Any], true: list[Any]) -> float:
    """Adjusted Rand index by enumerating every pair of items."""
    n = len(pred)
    same_p = same_t = same_both = 0
    for i, j in itertools.combinations(range(n), 2):
        p, t = pred[i] == pred[j], true[i] == true[j]
        same_p += p
        same_t += t
        same_both += p and t
    total = n * (n - 1) / 2
    expected = same_p * same_t / total if total else 0.0
    maximum = (same_p + same_t) / 2
    if maximum == expected:
        return 1.0
    return (same_both - expected) / (maximum - expected)


def components(n: int, edges: list[tuple[int, int]]) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(i) for i in range(n)]


# ------------------------------------------------------------------------------------------
# A small corpus with planted near-duplicates


@dataclass
class Corpus:
    texts: list[str | None]
    truth: list[tuple[int, int, str]]  # (source, copy, kind)


def _vocabulary(rng: random.Random, size: int = 400) -> list[str]:
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(1, 3)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)


def _substitute(rng: random.Random, words: list[str], vocab: list[str], count: int) -> list[str]:
    out = list(words)
    for pos in rng.sample(range(len(out)), count):
        out[pos] = rng.choice([w for w in vocab if w != out[pos]])
    return out


def make_corpus(seed: int = 3) -> Corpus:
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    originals = [[rng.choice(vocab) for _ in range(rng.randint(30, 80))] for _ in range(30)]
    texts: list[str | None] = [" ".join(words) for words in originals]
    truth: list[tuple[int, int, str]] = []

    def plant(source: int, words: list[str] | str, kind: str) -> int:
        texts.append(words if isinstance(words, str) else " ".join(words))
        truth.append((source, len(texts) - 1, kind))
        return len(texts) - 1

    for s in (0, 1, 2):
        plant(s, originals[s], "exact")
    for s in (3, 4, 5):
        cased = [w.upper() if i % 3 == 0 else w for i, w in enumerate(originals[s])]
        plant(s, ", ".join(cased) + "!", "case_punct")
    for s in (6, 7, 8):
        plant(s, _substitute(rng, originals[s], vocab, 1), "substitute_1")
    for s in (9, 10, 11):
        plant(s, _substitute(rng, originals[s], vocab, 3), "substitute_3")
    for s in (12, 13, 14):
        words = originals[s]
        plant(s, words[: int(len(words) * 0.9)], "truncate")
    for s in (15, 16):
        plant(s, _substitute(rng, originals[s], vocab, len(originals[s]) // 3), "heavy")
    # Two copies of one source: the copies are near-duplicates of each other too.
    plant(17, _substitute(rng, originals[17], vocab, 1), "substitute_1")
    plant(17, originals[17][:-2], "truncate")
    # Short documents (fewer than 5 words: one shingle each), empty and null texts.
    texts.append("tiny doc, HERE")
    plant(len(texts) - 1, "Tiny doc here", "case_punct")
    texts.append("tiny doc")
    texts.append("")
    texts.append("!!! ...")
    texts.append(None)
    texts.extend(" ".join(rng.choice(vocab) for _ in range(40)) for _ in range(6))
    return Corpus(texts=texts, truth=truth)


# ------------------------------------------------------------------------------------------
# Fake dedupe outputs


def _write_parquet_dir(path: Path, table: pa.Table) -> None:
    """A Spark-like directory: part file, _SUCCESS and a .crc the reader must skip."""
    path.mkdir(parents=True)
    pq.write_table(table, path / "part-00000.parquet")
    (path / "_SUCCESS").write_text("")
    (path / ".part-00000.parquet.crc").write_bytes(b"\x00junk")


@dataclass
class Scenario:
    corpus: Corpus
    ids: list[Any]
    exact: dict[tuple[int, int], float]  # brute-force Jaccard of every pair i < j
    labels: list[int]  # the output's cluster of each document (an index)
    pairs: list[tuple[int, int, str, float | None]]  # pairs/ rows: a, b, method, jaccard
    output: Path
    truth_path: Path
    corpus_path: Path


def build_scenario(tmp: Path, int_ids: bool = False, seed: int = 3) -> Scenario:
    corpus = make_corpus(seed)
    n = len(corpus.texts)
    rng = random.Random(seed + 1)
    exact = brute_all_pairs(corpus.texts)
    positives = sorted(p for p, j in exact.items() if j >= THRESHOLD)
    assert len(positives) >= 12  # the scenario needs some of everything
    # Output clusters: the components of the true positives, with three mistakes.
    dropped = positives[0]  # a missed pair: its documents stay apart
    edges = [p for p in positives if p != dropped]
    low = sorted(p for p, j in exact.items() if j < 0.3)
    false_edge = rng.choice(low[:50])  # a wrong merge, listed with its true low Jaccard
    false_null = rng.choice(low[50:])  # a wrong merge from "simhash" (jaccard null)
    edges += [false_edge, false_null]
    labels = components(n, edges)
    pairs: list[tuple[int, int, str, float | None]] = []
    for a, b in edges:
        if labels[a] == labels[b] and (a, b) != dropped:
            pairs.append((a, b, "minhash", exact[(a, b)]))
    # Two rows without a Jaccard: one true positive, one the false merge.
    true_null = next(p for p in positives if p != dropped)
    pairs = [
        (a, b, "simhash", None) if (a, b) in (true_null, false_null) else (a, b, m, j)
        for a, b, m, j in pairs
    ]

    order = list(range(n))
    rng.shuffle(order)
    ids: list[Any] = [1000 + 7 * order[i] if int_ids else f"doc-{order[i]:04d}" for i in range(n)]
    id_type = pa.int64() if int_ids else pa.string()
    cluster_of = {}
    for doc in range(n):
        members = [ids[d] for d in range(n) if labels[d] == labels[doc]]
        cluster_of[doc] = min(members)

    out = tmp / "out"
    _write_parquet_dir(
        out / "clusters",
        pa.table(
            {
                "doc_id": pa.array(ids, id_type),
                "cluster_id": pa.array([cluster_of[d] for d in range(n)], id_type),
                "is_representative": [ids[d] == cluster_of[d] for d in range(n)],
            }
        ),
    )
    rows = [(min(ids[a], ids[b]), max(ids[a], ids[b]), m, j) for a, b, m, j in pairs]
    _write_parquet_dir(
        out / "pairs",
        pa.table(
            {
                "doc_a": pa.array([r[0] for r in rows], id_type),
                "doc_b": pa.array([r[1] for r in rows], id_type),
                "method": [r[2] for r in rows],
                "similarity": [r[3] if r[3] is not None else 0.9 for r in rows],
                "jaccard": pa.array([r[3] for r in rows], pa.float64()),
                "estimate": pa.array([None] * len(rows), pa.float64()),
                "hamming": pa.array([3 if r[3] is None else None for r in rows], pa.int32()),
            }
        ),
    )
    id_col, text_col = ("doc_no", "body") if int_ids else ("id", "text")
    report = {
        "config": {
            "method": "minhash",
            "id_col": id_col,
            "text_col": text_col,
            "ngram": K,
            "threshold": THRESHOLD,
            "seed": 42,
            "normalize": {
                "nfkc": True,
                "casefold": True,
                "strip_punctuation": True,
                "collapse_whitespace": True,
            },
        },
        "counts": {"input_rows": n},
    }
    (out / "report.json").write_text(json.dumps(report))

    shuffled = list(range(n))
    rng.shuffle(shuffled)
    corpus_path = tmp / "gen" / "corpus"
    _write_parquet_dir(
        corpus_path,
        pa.table(
            {
                id_col: pa.array([ids[d] for d in shuffled], id_type),
                text_col: pa.array([corpus.texts[d] for d in shuffled], pa.string()),
                "other": list(range(n)),
            }
        ),
    )
    truth_rows = [
        (min(ids[s], ids[c]), max(ids[s], ids[c]), kind, exact[(min(s, c), max(s, c))])
        for s, c, kind in corpus.truth
    ]
    truth_path = tmp / "gen" / "truth"
    _write_parquet_dir(
        truth_path,
        pa.table(
            {
                "doc_a": pa.array([r[0] for r in truth_rows], id_type),
                "doc_b": pa.array([r[1] for r in truth_rows], id_type),
                "kind": [r[2] for r in truth_rows],
                "jaccard": [r[3] for r in truth_rows],
            }
        ),
    )
    return Scenario(corpus, ids, exact, labels, pairs, out, truth_path, corpus_path)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Scenario:
    return build_scenario(tmp_path_factory.mktemp("scenario"))


@pytest.fixture(scope="module")
def int_scenario(tmp_path_factory) -> Scenario:
    return build_scenario(tmp_path_factory.mktemp("int_scenario"), int_ids=True)


def _j(sc: Scenario, a: int, b: int) -> float:
    return sc.exact[(min(a, b), max(a, b))] if a != b else 1.0


def expected_truth_metrics(sc: Scenario, threshold: float, with_corpus: bool) -> dict[str, Any]:
    truth = [(s, c, kind, _j(sc, s, c)) for s, c, kind in sc.corpus.truth]
    positives = [(s, c) for s, c, _, j in truth if j >= threshold]
    found = [p for p in positives if sc.labels[p[0]] == sc.labels[p[1]]]
    positive_set = {frozenset(p) for p in positives}
    correct = 0
    for a, b, _, jac in sc.pairs:
        if jac is not None:
            correct += jac >= threshold
        elif with_corpus:
            correct += _j(sc, a, b) >= threshold
        else:
            correct += frozenset((a, b)) in positive_set
    precision = correct / len(sc.pairs)
    recall = len(found) / len(positives)
    n = len(sc.corpus.texts)
    true_labels = components(n, positives)
    by_kind: dict[str, list[int]] = {}
    for s, c, kind, _ in truth:
        entry = by_kind.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += sc.labels[s] == sc.labels[c]
    by_band = []
    for lo, hi in BANDS:
        inside = [
            (s, c)
            for s, c, _, j in truth
            if (lo <= j < hi) or (hi == 1.0 and j == 1.0) or (lo == 0.0 and j < lo)
        ]
        by_band.append((len(inside), sum(sc.labels[s] == sc.labels[c] for s, c in inside)))
    return {
        "positives": len(positives),
        "found": len(found),
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall),
        "ari": brute_ari(sc.labels, true_labels),
        "by_kind": by_kind,
        "by_band": by_band,
    }


# ------------------------------------------------------------------------------------------
# Tests: truth metrics


def test_scenario_plants_what_the_tests_need(scenario):
    kinds = {kind for _, _, kind in scenario.corpus.truth}
    assert {"exact", "case_punct", "substitute_1", "substitute_3", "truncate", "heavy"} <= kinds
    sims = [_j(scenario, s, c) for s, c, _ in scenario.corpus.truth]
    assert min(sims) < 0.5 < max(sims) == 1.0
    assert any(THRESHOLD > s >= 0.5 for s in sims)
    assert 50 <= len(scenario.corpus.texts) <= 70


@pytest.mark.parametrize("fixture", ["scenario", "int_scenario"])
def test_truth_metrics_match_brute_force(fixture, request):
    sc: Scenario = request.getfixturevalue(fixture)
    result = evaluate(str(sc.output), truth=str(sc.truth_path))
    want = expected_truth_metrics(sc, THRESHOLD, with_corpus=False)
    truth = result["truth"]
    assert result["threshold"] == THRESHOLD and result["threshold_source"] == "report.json"
    assert truth["positives"] == want["positives"]
    assert truth["positives_found"] == want["found"]
    assert truth["recall"] == pytest.approx(want["recall"])
    assert truth["precision"] == pytest.approx(want["precision"])
    assert truth["f1"] == pytest.approx(want["f1"])
    assert truth["ari"] == pytest.approx(want["ari"])
    assert truth["precision_basis"] == {
        "jaccard_column": len(sc.pairs) - 2,
        "corpus": 0,
        "truth_lookup": 2,
    }
    assert "lower bound" in truth["precision_definition"]
    got_kind = {r["kind"]: [r["pairs"], r["found"]] for r in truth["by_kind"]}
    assert got_kind == want["by_kind"]
    assert [(r["pairs"], r["found"]) for r in truth["by_band"]] == want["by_band"]
    assert [r["band"] for r in truth["by_band"]][1:] == [
        "0.5-0.6",
        "0.6-0.7",
        "0.7-0.8",
        "0.8-0.9",
        "0.9-1.0",
    ]
    # The deliberate mistakes are visible.
    assert truth["recall"] < 1.0 or truth["precision"] < 1.0
    assert result["checks"]["pairs_across_clusters"] == 0
    assert result["checks"]["representative_flag_wrong"] == 0
    assert result["checks"]["duplicate_doc_ids"] == 0


def test_threshold_argument_overrides_the_run(scenario):
    result = evaluate(str(scenario.output), truth=str(scenario.truth_path), threshold=0.6)
    want = expected_truth_metrics(scenario, 0.6, with_corpus=False)
    assert result["threshold"] == 0.6 and result["threshold_source"] == "argument"
    assert result["truth"]["positives"] == want["positives"]
    assert result["truth"]["recall"] == pytest.approx(want["recall"])
    assert result["truth"]["precision"] == pytest.approx(want["precision"])
    assert result["truth"]["ari"] == pytest.approx(want["ari"])


def test_generated_dir_stands_for_its_truth_and_corpus(scenario):
    gen = scenario.truth_path.parent
    result = evaluate(str(scenario.output), truth=str(gen), corpus=str(gen))
    assert result["truth"]["truth"].endswith("truth")
    assert result["oracle"]["corpus"].endswith("corpus")


# ------------------------------------------------------------------------------------------
# Tests: the oracle


@pytest.mark.parametrize("fixture", ["scenario", "int_scenario"])
def test_oracle_matches_brute_force(fixture, request):
    sc: Scenario = request.getfixturevalue(fixture)
    result = evaluate(str(sc.output), truth=str(sc.truth_path), corpus=str(sc.corpus_path))
    oracle = result["oracle"]
    positives = [p for p, j in sc.exact.items() if j >= THRESHOLD]
    found = [p for p in positives if sc.labels[p[0]] == sc.labels[p[1]]]
    listed = {frozenset((a, b)) for a, b, _, _ in sc.pairs}
    correct = sum(_j(sc, a, b) >= THRESHOLD for a, b, _, _ in sc.pairs)
    co_clustered = sum(
        sc.labels[i] == sc.labels[j] for i, j in itertools.combinations(range(len(sc.labels)), 2)
    )
    assert oracle["docs"] == len(sc.corpus.texts)
    assert oracle["positives"] == len(positives)
    assert oracle["found"] == len(found)
    assert oracle["missed"] == len(positives) - len(found)
    assert oracle["recall"] == pytest.approx(len(found) / len(positives))
    assert oracle["listed_in_pairs"] == sum(frozenset(p) in listed for p in positives)
    assert oracle["reported_correct"] == correct
    assert oracle["precision"] == pytest.approx(correct / len(sc.pairs))
    assert oracle["co_clustered_pairs"] == co_clustered
    assert oracle["cluster_pair_precision"] == pytest.approx(len(found) / co_clustered)
    assert oracle["jaccard_checked"] == len(sc.pairs) - 2
    assert oracle["jaccard_mismatches"] == 0
    bands = {r["band"]: r for r in oracle["by_band"]}
    assert set(bands) == {"0.8-0.9", "0.9-1.0"}
    assert sum(r["positives"] for r in bands.values()) == len(positives)
    assert sum(r["missed"] for r in bands.values()) == oracle["missed"]
    # With the corpus, null-Jaccard rows are measured rather than looked up in the truth.
    want = expected_truth_metrics(sc, THRESHOLD, with_corpus=True)
    assert result["truth"]["precision"] == pytest.approx(want["precision"])
    assert result["truth"]["precision_basis"]["corpus"] == 2
    assert result["truth"]["truth_jaccard_check"]["disagreements"] == 0


@pytest.mark.parametrize("strategy", ["product", "prefix", "auto"])
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("block_work", [1, 50, 10**9])
def test_similar_pairs_is_the_brute_force_set(scenario, strategy, threshold, block_work):
    texts = scenario.corpus.texts
    matrix = shingle_matrix(pa.array(texts, pa.string()), K, seed=42)
    i, j, sim = similar_pairs(matrix, threshold, block_work=block_work, strategy=strategy)
    got = {(int(a), int(b)): float(s) for a, b, s in zip(i, j, sim, strict=True)}
    want = {p: s for p, s in scenario.exact.items() if s >= threshold}
    assert got == want  # same pairs, same float values
    assert all(a < b for a, b in got)


def test_shingle_matrix_sizes_and_intersections(scenario):
    texts = scenario.corpus.texts
    matrix = shingle_matrix(pa.array(texts, pa.string()), K, seed=7, batch_docs=7)
    sets = [shingle_set(t) for t in texts]
    assert matrix.sizes.tolist() == [len(s) for s in sets]
    pairs = list(itertools.combinations(range(len(texts)), 2))
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    assert matrix.intersections(a, b).tolist() == [len(sets[x] & sets[y]) for x, y in pairs]
    assert matrix.jaccard(a, b).tolist() == [scenario.exact[p] for p in pairs]


def test_prefix_matrix_keeps_a_prefix_of_each_document(scenario):
    texts = scenario.corpus.texts
    matrix = shingle_matrix(pa.array(texts, pa.string()), K, seed=42)
    prefix = prefix_matrix(matrix, 0.8)
    assert prefix.has_canonical_format
    assert (prefix.multiply(matrix.shared) != prefix).nnz == 0  # a subset of the entries
    assert prefix.nnz < matrix.shared.nnz


def test_oracle_switches_to_the_prefix_filter_on_heavy_work(scenario, monkeypatch):
    plain = evaluate(str(scenario.output), corpus=str(scenario.corpus_path))["oracle"]
    assert plain["strategy"] == "product" and plain["product_work"] > 0
    monkeypatch.setattr("neardup_spark.quality.evaluate.PREFIX_FILTER_WORK", 0)
    prefixed = evaluate(str(scenario.output), corpus=str(scenario.corpus_path))["oracle"]
    assert prefixed["strategy"] == "prefix"
    for key in ("positives", "found", "listed_in_pairs", "reported_correct", "by_band"):
        assert prefixed[key] == plain[key], key


def test_oracle_refuses_a_large_corpus(scenario):
    with pytest.raises(UserError, match="limited to"):
        evaluate(str(scenario.output), corpus=str(scenario.corpus_path), oracle_max_docs=10)


def test_oracle_refuses_a_foreign_corpus(scenario, tmp_path):
    other = tmp_path / "other"
    _write_parquet_dir(other, pa.table({"id": ["x", "y"], "text": ["a b c", "d e f"]}))
    with pytest.raises(UserError, match="does not belong"):
        evaluate(str(scenario.output), corpus=str(other))


def test_oracle_reports_a_missing_text_column(scenario, tmp_path):
    other = tmp_path / "other"
    _write_parquet_dir(other, pa.table({"id": ["x"], "body": ["a"]}))
    with pytest.raises(UserError, match="lacks column"):
        evaluate(str(scenario.output), corpus=str(other))


# ------------------------------------------------------------------------------------------
# Tests: ARI


def test_ari_perfect_and_relabelled():
    labels = np.array([0, 0, 1, 1, 1, 2, 3, 3])
    assert adjusted_rand_index(labels, labels) == 1.0
    assert adjusted_rand_index(labels, 10 * labels[::-1][::-1] + 5) == 1.0


def test_ari_hand_computed():
    # n = 4; contingency [[2, 0, 0], [0, 1, 1]]: index 1, A = 2, B = 1, E = 2/6, max = 1.5
    # -> (1 - 1/3) / (1.5 - 1/3) = 4/7.
    assert adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([0, 0, 1, 2])) == pytest.approx(
        4 / 7
    )
    # Opposite pairings: index 0, A = B = 2, E = 4/6 -> (0 - 2/3) / (2 - 2/3) = -1/2.
    assert adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])) == pytest.approx(
        -0.5
    )
    # All singletons against one pair: index 0, A = 0, B = 1, E = 0 -> 0.
    assert adjusted_rand_index(np.array([0, 1, 2]), np.array([0, 0, 1])) == 0.0


def test_ari_degenerate_partitions_agree():
    assert adjusted_rand_index(np.arange(5), np.arange(5)[::-1]) == 1.0  # all singletons
    assert adjusted_rand_index(np.zeros(5, int), np.ones(5, int)) == 1.0  # one cluster
    assert adjusted_rand_index(np.zeros(1, int), np.zeros(1, int)) == 1.0
    assert adjusted_rand_index(np.zeros(0, int), np.zeros(0, int)) == 1.0


def test_ari_random_labellings_match_pair_counting():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        a = rng.integers(0, rng.integers(1, 8), n)
        b = rng.integers(0, rng.integers(1, 8), n)
        assert adjusted_rand_index(a, b) == pytest.approx(brute_ari(a.tolist(), b.tolist()))
        agreement = clustering_agreement(a, b)
        same_both = sum(
            a[i] == a[j] and b[i] == b[j] for i, j in itertools.combinations(range(n), 2)
        )
        assert agreement["pairs_same_both"] == same_both


def test_band_of_edges():
    assert band_of(np.array([0.0, 0.49, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0])).tolist() == [
        0,
        0,
        1,
        2,
        3,
        4,
        5,
        5,
        5,
    ]


# ------------------------------------------------------------------------------------------
# Tests: errors and printing


def test_missing_report_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"report\.json not found"):
        evaluate(str(tmp_path))


def test_missing_threshold_is_a_user_error(scenario, tmp_path):
    out = tmp_path / "out"
    for name in ("clusters", "pairs"):
        src = scenario.output / name
        (out / name).mkdir(parents=True)
        (out / name / "part-00000.parquet").write_bytes((src / "part-00000.parquet").read_bytes())
    (out / "report.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(UserError, match="threshold"):
        evaluate(str(out))
    assert evaluate(str(out), threshold=0.9)["summary"]["docs"] == len(scenario.ids)


def test_truth_of_another_corpus_is_a_user_error(scenario, tmp_path):
    truth = tmp_path / "truth"
    _write_parquet_dir(
        truth,
        pa.table({"doc_a": ["zz-1"], "doc_b": ["zz-2"], "kind": ["exact"], "jaccard": [1.0]}),
    )
    with pytest.raises(UserError, match="does not belong"):
        evaluate(str(scenario.output), truth=str(truth))


def test_summary_without_truth_or_corpus(scenario):
    result = evaluate(str(scenario.output))
    summary = result["summary"]
    assert result["truth"] is None and result["oracle"] is None
    assert summary["docs"] == len(scenario.ids)
    assert summary["clusters"] == len(set(scenario.labels))
    assert summary["pairs"] == len(scenario.pairs)
    assert summary["pairs_by_method"] == {"minhash": len(scenario.pairs) - 2, "simhash": 2}


def test_format_table_shows_every_section(scenario, tmp_path):
    labelled = _synthetic_labelled_dir(tmp_path)
    result = evaluate(
        str(scenario.output),
        truth=str(scenario.truth_path),
        corpus=str(scenario.corpus_path),
        labelled_dir=str(labelled),
    )
    text = format_table(result)
    for needle in (
        "pair precision",
        "pair recall",
        "cluster ARI",
        "substitute_3",
        "0.9-1.0",
        "Exact all-pairs oracle",
        "edge recall",
        "Labelled sets",
        "copycat_judgments",
        "clough_stevenson",
    ):
        assert needle in text, needle
    json.dumps(result)  # the result is plain JSON


def test_command_line(scenario, tmp_path, capsys):
    out_json = tmp_path / "result.json"
    code = main(
        [
            "evaluate",
            str(scenario.output),
            "--truth",
            str(scenario.truth_path),
            "--json",
            str(out_json),
        ]
    )
    assert code == 0
    assert "pair recall" in capsys.readouterr().out
    assert json.loads(out_json.read_text())["truth"]["pairs"] == len(scenario.corpus.truth)
    assert main(["evaluate", str(tmp_path / "nowhere")]) == 2
    assert "not found" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# Tests: labelled sets

BASE = (
    "the crawler fetched the page and stored every word of its text in the archive "
    "so that later runs could compare the copies with the originals and count them"
)


def _synthetic_labelled_dir(tmp: Path) -> Path:
    root = tmp / "labelled"
    copycat = root / "copycat_judgments"
    copycat.mkdir(parents=True)
    other = "a completely different text about gardens and rivers and the weather in spring"
    light = BASE.replace("archive", "store")
    rows = [
        ("3", BASE, BASE),  # TP
        ("3", BASE, other),  # FN
        ("0.5", BASE, BASE.upper() + "!"),  # FP
        ("0.5", BASE, other),  # TN
        ("0.5", other, light),  # TN
        ("2", BASE, light),
        ("unknown", BASE, BASE),
        ("0.5s", BASE, BASE),
    ]
    with open(copycat / "pairs.jsonl", "w", encoding="utf-8") as handle:
        for label, first, second in rows:
            record = {"label_raw": label, "first_text": first, "second_text": second, "s3": 0.1}
            handle.write(json.dumps(record) + "\n")
    clough = root / "clough_stevenson"
    clough.mkdir()
    docs = [
        ("orig_taska.txt", "a", "orig", BASE),
        ("g0_taska.txt", "a", "cut", BASE + "\nand more"),
        ("g1_taska.txt", "a", "light", light),
        ("g2_taska.txt", "a", "heavy", other + " " + BASE[:40]),
        ("g3_taska.txt", "a", "non", other),
    ]
    with open(clough / "docs.csv", "w", encoding="utf-8", newline="") as handle:
        handle.write("File,Task,Category,text\n")
        for name, task, cat, text in docs:
            handle.write(f'{name},{task},{cat},"{text}"\n')
    with open(clough / "pairs.csv", "w", encoding="utf-8", newline="") as handle:
        handle.write("answer_file,source_file,task,category\n")
        for name, task, cat, _ in docs[1:]:
            handle.write(f"{name},orig_taska.txt,{task},{cat}\n")
    return root


def test_labelled_synthetic(tmp_path):
    root = _synthetic_labelled_dir(tmp_path)
    result = evaluate_labelled(root, threshold=0.8)
    assert result["available"]
    copycat = result["sets"]["copycat_judgments"]
    assert (copycat["tp"], copycat["fp"], copycat["fn"], copycat["tn"]) == (1, 1, 1, 2)
    assert copycat["precision"] == 0.5 and copycat["recall"] == 0.5
    assert copycat["ignored"] == {"unknown": 1, "0.5s": 1}
    by_label = {r["label"]: r for r in copycat["labels"]}
    assert [r["label"] for r in copycat["labels"]] == ["3", "2", "1", "0.5"]
    assert by_label["1"]["pairs"] == 0 and by_label["1"]["mean_jaccard"] is None
    assert by_label["3"]["mean_jaccard"] == pytest.approx(0.5)
    assert by_label["2"]["role"] == "intermediate"
    light_j = brute_jaccard(shingle_set(BASE), shingle_set(BASE.replace("archive", "store")))
    assert by_label["2"]["mean_jaccard"] == pytest.approx(light_j)

    clough = result["sets"]["clough_stevenson"]
    cut_j = brute_jaccard(shingle_set(BASE), shingle_set(BASE + "\nand more"))
    by_label = {r["label"]: r for r in clough["labels"]}
    assert by_label["cut"]["mean_jaccard"] == pytest.approx(cut_j)
    assert by_label["light"]["mean_jaccard"] == pytest.approx(light_j)
    assert by_label["non"]["mean_jaccard"] == 0.0
    assert clough["tp"] == (cut_j >= 0.8) + (light_j >= 0.8)
    assert clough["fp"] == 0 and clough["precision"] in (1.0, None)
    assert clough["recall"] == pytest.approx(clough["tp"] / 2)


def test_labelled_absent_is_skipped_with_a_note(tmp_path):
    result = evaluate_labelled(tmp_path / "nowhere")
    assert not result["available"] and "not found" in result["note"]
    (tmp_path / "partial" / "clough_stevenson").mkdir(parents=True)
    partial = evaluate_labelled(tmp_path / "partial")
    assert not partial["available"]
    assert not partial["sets"]["copycat_judgments"]["available"]
    assert "docs.csv" in partial["sets"]["clough_stevenson"]["note"]
    assert "not found" in format_table(
        {
            "output": "x",
            "threshold": 0.8,
            "threshold_source": "argument",
            "summary": {
                "docs": 0,
                "clusters": 0,
                "duplicate_clusters": 0,
                "docs_in_duplicate_clusters": 0,
                "pairs": 0,
            },
            "labelled": result,
        }
    )


def test_labelled_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(LABELLED_ENV, str(tmp_path / "x"))
    assert default_labelled_dir() == tmp_path / "x"
    monkeypatch.delenv(LABELLED_ENV)
    assert default_labelled_dir().parts[-3:] == ("shared", "data", "labelled")


def test_text_pair_jaccard_matches_brute_force(scenario):
    texts = scenario.corpus.texts
    first, second = texts[:-1], texts[1:]
    got = text_pair_jaccard(first, second)
    want = [
        brute_jaccard(shingle_set(a), shingle_set(b)) for a, b in zip(first, second, strict=True)
    ]
    assert got.tolist() == want


def test_labelled_real_data_when_present():
    root = default_labelled_dir()
    if not root.is_dir():
        pytest.skip(f"labelled data not present at {root}")
    result = evaluate_labelled(root, threshold=0.8)
    copycat = result["sets"]["copycat_judgments"]
    counts = {r["label"]: r["pairs"] for r in copycat["labels"]}
    assert counts["3"] >= 50 and counts["0.5"] >= 100
    means = {r["label"]: r["mean_jaccard"] for r in copycat["labels"]}
    assert means["3"] > means["2"] > means["0.5"]
    clough = result["sets"]["clough_stevenson"]
    assert sum(r["pairs"] for r in clough["labels"]) == 95
    for s in (copycat, clough):
        assert 0.0 <= s["precision"] <= 1.0 and 0.0 <= s["recall"] <= 1.0
