"""The rows that run in their own process as ``neardup bench-row ROW CORPUS OUT``: the hashing
floor, Spark MLlib, datasketch and rensa. Each writes ``OUT/stats.json`` (its Spark start-up and its
timed work) and, except the floor, its pairs to ``OUT/pairs`` (``doc_a``, ``doc_b``).

``floor``
    A Spark job in the CLI's configuration (:func:`neardup_spark.runtime.session.build_session`
    with ``local[2]``, so ``LOCAL_DEFAULTS`` and the Arrow batch size) that reads the corpus and,
    in ``mapInArrow``, normalises, splits, hashes every word and combines the word hashes into
    every word 5-shingle hash (``normalize_texts`` + ``word_batch`` + ``combine_word_hashes``),
    returning only counts: the read + tokenise + hash floor.

``spark-mllib``
    ``RegexTokenizer`` (lower-cases, splits on runs of characters that are not letters, digits
    or marks: the project's punctuation rule without NFKC/casefold), ``NGram(n=5)``,
    ``HashingTF(numFeatures=2**24, binary=True)``, ``MinHashLSH(numHashTables=5)`` fitted as one
    ``Pipeline``; the transformed ``(id, features, hashes)`` persisted (the join reads it twice)
    and ``approxSimilarityJoin(df, df, 1 - threshold)`` keeping ``doc_a < doc_b``; the pairs
    written as Parquet (``doc_a``, ``doc_b``, ``similarity`` = 1 - MLlib's distance). Documents
    with fewer than 5 tokens are dropped first (MLlib rejects empty vectors); the bench counts
    them afterwards with the same regex in PyArrow (outside the timed process). The CLI's Spark
    session (``build_session``: ``local[2]``, 2 GB driver), with adaptive execution on and 8
    shuffle partitions (:data:`MLLIB_SPARK`: its better settings).

``datasketch``
    One Python process; per document the distinct word 5-shingles of the project's normalised
    text (a shorter document is one shingle of all its words, as in neardup; an empty one is
    skipped), ``MinHash(num_perm=200)`` via ``MinHash.generator`` (datasketch's bulk path,
    default SHA-1 hashing), then ``MinHashLSH(threshold, num_perm=200)``: ``query`` then
    ``insert``; every returned key is a pair (no verification, as the LSH index is normally
    used).

``rensa``
    :mod:`neardup_spark.bench.rensa_row`: rensa's MinHash on two processes, its LSH banded for
    recall >= 0.99 at the threshold, union-find, no verification.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from neardup_spark.bench.rensa_row import child_rensa
from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.kernels.normalize import NormalizeOptions, normalize_texts
from neardup_spark.kernels.shingles import combine_word_hashes, word_batch
from neardup_spark.runtime.session import build_session

STATS_FILE = "stats.json"
NGRAM = 5
NUM_PERM = 200
MLLIB_FEATURES = 1 << 24
MLLIB_TABLES = 5
# Java regex in RegexTokenizer and RE2 in PyArrow read these Unicode classes alike.
MLLIB_TOKEN_GAPS = r"[^\p{L}\p{N}\p{M}]+"
DATASKETCH_BATCH = 2000


def write_stats(path: str, stats: dict[str, Any]) -> None:
    """A child's timings and counts, read back by the bench (``stats.json``)."""
    Path(path).write_text(json.dumps(stats, indent=2) + "\n")


def floor_batch_fn(
    ngram: int, seed: int, options: NormalizeOptions
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function of the floor: normalise, hash every shingle, return counts only.

    The function refers to kernels and libraries only, not to this module, so the Python
    workers that unpickle it do not import the bench."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            words = word_batch(normalize_texts(batch.column(0), options), seed)
            offsets, hashes = combine_word_hashes(words, ngram)
            # A checksum of the hashes, so that every one of them is really used.
            xor = int(np.bitwise_xor.reduce(hashes.view(np.int64))) if hashes.size else 0
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([batch.num_rows], pa.int64()),
                    pa.array([int(words.offsets[-1])], pa.int64()),
                    pa.array([int(offsets[-1])], pa.int64()),
                    pa.array([xor], pa.int64()),
                ],
                names=["docs", "words", "shingles", "xor"],
            )

    return run


# Spark MLlib keeps the settings it was first measured with (issue 5: adaptive execution on, 8
# shuffle partitions): the job's local defaults are tuned for neardup's stages, and without
# adaptive execution and with 4 partitions MLlib's similarity join ran 258 -> 354 s at 100,000.
MLLIB_SPARK = {"spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": "8"}


def _session(
    master: str, app: str, spark_settings: dict[str, str] | None = None
) -> tuple[SparkSession, float]:
    """A session as the CLI builds it, and the seconds it took (JVM launch included)."""
    settings = SessionSettings(master=master, spark=dict(spark_settings or {}))
    started = time.perf_counter()
    spark = build_session(settings, app_name=app)
    return spark, time.perf_counter() - started


def child_floor(corpus: str, master: str) -> dict[str, Any]:
    """The read + tokenise + hash floor, in the CLI's Spark configuration."""
    config = DedupeConfig()
    spark, start = _session(master, "neardup-bench-floor")
    try:
        started = time.perf_counter()
        schema = "docs long, words long, shingles long, xor long"
        fn = floor_batch_fn(config.ngram, config.seed, config.normalize)
        row = (
            spark.read.parquet(corpus)
            .select("text")
            .mapInArrow(fn, schema)
            .agg(
                F.sum("docs").alias("docs"),
                F.sum("words").alias("words"),
                F.sum("shingles").alias("shingles"),
                F.bit_xor("xor").alias("xor"),
            )
            .first()
        )
        work = time.perf_counter() - started
        assert row is not None
        counts = {k: int(v or 0) for k, v in row.asDict().items()}
    finally:
        spark.stop()
    return {"spark_start_seconds": start, "work_seconds": work, "counts": counts}


def child_mllib(corpus: str, output: str, master: str, threshold: float) -> dict[str, Any]:
    """Spark MLlib's MinHashLSH pipeline; pairs written to ``output/pairs``."""
    # Deferred: pyspark.ml is needed by this row's process only, not by every `neardup` command.
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import HashingTF, MinHashLSH, MinHashLSHModel, NGram, RegexTokenizer

    spark, start = _session(master, "neardup-bench-mllib", MLLIB_SPARK)
    try:
        started = time.perf_counter()
        docs = spark.read.parquet(corpus).select("id", "text")
        tokens = RegexTokenizer(
            inputCol="text", outputCol="words", pattern=MLLIB_TOKEN_GAPS, toLowercase=True
        ).transform(docs)
        hashable = tokens.where(F.size("words") >= NGRAM)
        model = Pipeline(
            stages=[
                NGram(n=NGRAM, inputCol="words", outputCol="ngrams"),
                HashingTF(
                    inputCol="ngrams", outputCol="features", numFeatures=MLLIB_FEATURES, binary=True
                ),
                MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=MLLIB_TABLES),
            ]
        ).fit(hashable)
        # The join reads its input twice: persist it (as neardup persists what two stages
        # read), with only the id and the vectors: carrying text, words and n-grams through
        # the join's shuffles and distinct() costs several times more.
        hashed = (
            model.transform(hashable)
            .select("id", "features", "hashes")
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        lsh: MinHashLSHModel = model.stages[-1]  # type: ignore[assignment]
        pairs = (
            lsh.approxSimilarityJoin(hashed, hashed, 1.0 - threshold, distCol="distance")
            .where(F.col("datasetA.id") < F.col("datasetB.id"))
            .select(
                F.col("datasetA.id").alias("doc_a"),
                F.col("datasetB.id").alias("doc_b"),
                (1.0 - F.col("distance")).alias("similarity"),
            )
        )
        pairs.write.mode("overwrite").parquet(os.path.join(output, "pairs"))
        work = time.perf_counter() - started
    finally:
        spark.stop()
    return {"spark_start_seconds": start, "work_seconds": work}


def child_datasketch(corpus: str, output: str, threshold: float) -> dict[str, Any]:
    """datasketch MinHash + MinHashLSH in this one process; pairs to ``output/pairs``."""
    # Deferred: datasketch is a dev dependency (the bench's peer), needed by this row only.
    from datasketch import MinHash, MinHashLSH

    started = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    pair_a: list[str] = []
    pair_b: list[str] = []
    docs = empty = 0
    dataset = ds.dataset(corpus, format="parquet")
    for batch in dataset.to_batches(columns=["id", "text"], batch_size=DATASKETCH_BATCH):
        ids = batch.column(0).to_pylist()
        texts = normalize_texts(batch.column(1)).to_pylist()
        shingle_lists: list[list[bytes]] = []
        for text in texts:
            words = text.split() if text else []
            if len(words) < NGRAM:
                shingles = {" ".join(words)} if words else set()
            else:
                shingles = {" ".join(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)}
            shingle_lists.append([s.encode("utf-8") for s in shingles])
        sketches = MinHash.generator(shingle_lists, num_perm=NUM_PERM)
        for doc_id, shingles_of_doc, minhash in zip(ids, shingle_lists, sketches, strict=True):
            docs += 1
            if not shingles_of_doc:
                empty += 1
                continue
            for other in lsh.query(minhash):
                a, b = (other, doc_id) if other < doc_id else (doc_id, other)
                pair_a.append(a)
                pair_b.append(b)
            lsh.insert(doc_id, minhash)
    pairs_dir = Path(output) / "pairs"
    pairs_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"doc_a": pa.array(pair_a, pa.string()), "doc_b": pa.array(pair_b, pa.string())}),
        pairs_dir / "part-00000.parquet",
    )
    work = time.perf_counter() - started
    return {
        "spark_start_seconds": None,
        "work_seconds": work,
        "counts": {"docs": docs, "empty": empty},
    }


def run_child_row(row: str, corpus: str, output: str, master: str, threshold: float) -> None:
    """One row's process (``neardup bench-row ROW CORPUS OUT``): run it, write its stats."""
    Path(output).mkdir(parents=True, exist_ok=True)
    if row == "floor":
        stats = child_floor(corpus, master)
    elif row == "spark-mllib":
        stats = child_mllib(corpus, output, master, threshold)
    elif row == "rensa":
        stats = child_rensa(corpus, output, threshold)
    else:
        stats = child_datasketch(corpus, output, threshold)
    write_stats(os.path.join(output, STATS_FILE), stats)
