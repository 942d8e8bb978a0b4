"""The ``rensa`` row: the single-machine MinHash library people pick instead of a Spark job.

rensa (Rust MinHash, on PyPI) as its README uses it, on both cores: two worker processes
sketch record batches of the corpus (the project's normalised text, its distinct word
5-shingles: a shorter document is one shingle of all its words, an empty one is skipped, as in
the datasketch row) with ``RMinHash.from_token_sets`` (200 permutations); this process inserts
every sketch into one ``RMinHashLSH`` whose banding is chosen for recall >= 0.99 at the
threshold (:func:`banding_for`), queries every sketch, and joins the candidate pairs into
clusters by union-find. No verification, as rensa's LSH is normally used: every candidate is a
pair. Pairs go to ``OUT/pairs`` (``doc_a``, ``doc_b``) for the bench to score."""

from __future__ import annotations

import time
from collections.abc import Iterator
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from neardup_spark.kernels.normalize import normalize_texts

NUM_PERM = 200
NGRAM = 5
SEED = 1
PROCESSES = 2
BATCH_DOCS = 4_096
RECALL_AT_THRESHOLD = 0.99


def banding_for(
    threshold: float, num_perm: int = NUM_PERM, recall: float = RECALL_AT_THRESHOLD
) -> int:
    """The number of bands (a divisor of ``num_perm``) with the most rows per band whose
    probability of making a pair at Jaccard ``threshold`` candidates, 1 - (1 - t^r)^b, is at
    least ``recall``: the fewest false candidates at that recall."""
    for bands in sorted(b for b in range(1, num_perm + 1) if num_perm % b == 0):
        rows = num_perm // bands
        if 1.0 - (1.0 - threshold**rows) ** bands >= recall:
            return bands
    return num_perm


def shingle_sets(texts: list[str | None]) -> list[list[str]]:
    """Each normalised text's distinct word 5-shingles (one of all its words below five)."""
    sets: list[list[str]] = []
    for text in texts:
        words = text.split() if text else []
        if len(words) < NGRAM:
            sets.append([" ".join(words)] if words else [])
        else:
            sets.append(
                list({" ".join(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)})
            )
    return sets


def sketch_batch(batch: tuple[int, list[str | None]]) -> tuple[list[int], list[Any]]:
    """A worker's part: the rows (corpus order) of the batch's documents that have any
    shingle, and their sketches (rensa ``RMinHash``, picklable)."""
    from rensa import RMinHash  # the [bench] extra's; needed by this row only

    offset, texts = batch
    normalised = normalize_texts(pa.array(texts, pa.string())).to_pylist()
    sets = shingle_sets(normalised)
    rows = [offset + i for i, shingles in enumerate(sets) if shingles]
    return rows, RMinHash.from_token_sets([s for s in sets if s], NUM_PERM, SEED)


def _text_batches(corpus: str, ids: list[Any]) -> Iterator[tuple[int, list[str | None]]]:
    """The corpus's texts by batch with the row of their first; ``ids`` collects the ids
    (in the pool's feeding thread, the only one that appends)."""
    for batch in ds.dataset(corpus, format="parquet").to_batches(
        columns=["id", "text"], batch_size=BATCH_DOCS
    ):
        offset = len(ids)
        ids.extend(batch.column(0).to_pylist())
        yield offset, batch.column(1).to_pylist()


def union_find_clusters(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Each of ``n`` documents' root under the pairs (``a[i]``, ``b[i]``): union-find with
    path halving, as a single-machine user writes it."""
    parent = np.arange(n)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    return np.array([find(x) for x in range(n)], dtype=np.int64)


def child_rensa(corpus: str, output: str, threshold: float) -> dict[str, Any]:
    """The row's work: sketch on two processes, band, query, union-find; pairs to
    ``output/pairs``; returns the stats the bench reads."""
    from rensa import RMinHashLSH

    started = time.perf_counter()
    bands = banding_for(threshold)
    lsh = RMinHashLSH(threshold, NUM_PERM, bands)
    ids: list[Any] = []
    keys: list[int] = []  # the row of each sketch in ``ids``
    sketches: list[Any] = []
    with get_context("spawn").Pool(PROCESSES) as pool:
        for rows, batch_sketches in pool.imap(sketch_batch, _text_batches(corpus, ids)):
            keys.extend(rows)
            sketches.extend(batch_sketches)
    lsh.insert_pairs(list(zip(keys, sketches, strict=True)))
    pair_a: list[int] = []
    pair_b: list[int] = []
    for key, found in zip(keys, lsh.query_all(sketches), strict=True):
        for other in found:
            if other > key:
                pair_a.append(key)
                pair_b.append(other)
    a, b = np.array(pair_a, dtype=np.int64), np.array(pair_b, dtype=np.int64)
    roots = union_find_clusters(a, b, len(ids))
    id_array = pa.array(ids)
    pairs_dir = Path(output) / "pairs"
    pairs_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"doc_a": id_array.take(pa.array(a)), "doc_b": id_array.take(pa.array(b))}),
        pairs_dir / "part-00000.parquet",
    )
    work = time.perf_counter() - started
    sizes = np.bincount(roots)
    return {
        "spark_start_seconds": None,
        "work_seconds": work,
        "counts": {
            "docs": len(ids),
            "empty": len(ids) - len(keys),
            "bands": bands,
            "clusters": int(np.count_nonzero(sizes > 1)),
        },
    }
