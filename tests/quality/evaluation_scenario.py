"""A small corpus with planted near-duplicates, a fake dedupe OUTPUT scored against it, and
pure-Python brute force: what the evaluation tests compare the evaluator with (no Spark).

A corpus of ~60 documents is shingled in pure Python (word 5-tuples of ``normalize_text``),
every pair compared in a double loop, and a fake OUTPUT (clusters/, pairs/, report.json) with
deliberate mistakes is built from it. Imported by the tests of ``neardup_spark.quality`` and of
``neardup evaluate``; not a test module itself.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.quality.metrics import BANDS

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


def write_parquet_dir(path: Path, table: pa.Table) -> None:
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
    write_parquet_dir(
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
    write_parquet_dir(
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
    write_parquet_dir(
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
    write_parquet_dir(
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


def scenario_jaccard(sc: Scenario, a: int, b: int) -> float:
    return sc.exact[(min(a, b), max(a, b))] if a != b else 1.0


def expected_truth_metrics(sc: Scenario, threshold: float, with_corpus: bool) -> dict[str, Any]:
    truth = [(s, c, kind, scenario_jaccard(sc, s, c)) for s, c, kind in sc.corpus.truth]
    positives = [(s, c) for s, c, _, j in truth if j >= threshold]
    found = [p for p in positives if sc.labels[p[0]] == sc.labels[p[1]]]
    positive_set = {frozenset(p) for p in positives}
    correct = 0
    for a, b, _, jac in sc.pairs:
        if jac is not None:
            correct += jac >= threshold
        elif with_corpus:
            correct += scenario_jaccard(sc, a, b) >= threshold
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
# Labelled sets

BASE = (
    "the crawler fetched the page and stored every word of its text in the archive "
    "so that later runs could compare the copies with the originals and count them"
)


def synthetic_labelled_dir(tmp: Path) -> Path:
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
