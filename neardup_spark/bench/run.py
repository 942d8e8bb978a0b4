"""``neardup bench``: neardup side by side with the hashing floor, Spark MLlib and datasketch.

Every row runs as its own process on the same generated corpus and is measured the same way:

*wall seconds*
    The whole process, from ``Popen`` to its exit: interpreter start, imports, JVM start, the
    work, writing outputs, ``spark.stop()``.
*JVM start*
    Spark rows time their own ``SparkSession`` creation (JVM launch included) and report it
    apart. ``neardup-*`` rows print it (``+ X s Spark start-up``); ``floor`` and ``spark-mllib``
    write it to ``stats.json``. datasketch has no JVM.
*work seconds* and *docs/s*
    ``docs / work seconds``, i.e. JVM start excluded. Work = ``report.json`` ``wall_seconds``
    for the neardup CLI (read to ``_SUCCESS``); the timed work in the child for the other rows
    (after the session exists: read, compute, write; for datasketch: read, normalise, sketch,
    index, write). ``docs/s wall`` is ``docs / wall seconds``.
*peak memory*
    The maximum over time of the summed resident set size (``/proc/PID/statm``) of the row's
    process and all its descendants (JVM, Python workers), sampled every
    :data:`SAMPLE_INTERVAL` seconds. Summed RSS counts pages shared between forked workers once
    per process, so it is an upper bound on the physical memory used.
*pairs, recall, precision*
    Computed the same way for every row from its ``pairs/`` Parquet (``doc_a``, ``doc_b``), see
    :func:`pair_quality`: *precision* = distinct found pairs whose exact Jaccard (word
    5-shingles, default normalisation, the project's kernels) reaches the threshold / distinct
    found pairs; *recall* = truth pairs with ``jaccard >= threshold`` whose two documents are
    connected by the found pairs (connected components, i.e. union-find) / such truth pairs.
    A row reporting more than :data:`PRECISION_SAMPLE` distinct pairs has its precision
    measured on a uniform sample of that many (said in the table's notes).
    neardup rows are also scored with :func:`neardup_spark.quality.evaluate.evaluate` (its recall
    is the same number; its precision reads the ``jaccard`` column); the result is kept in
    ``results.json``.

Rows (``--rows``)
    ``floor``: a Spark job in the CLI's configuration
    (:func:`neardup_spark.runtime.session.build_session`
    with ``local[2]``, so ``LOCAL_DEFAULTS`` and the Arrow batch size) that reads the corpus and,
    in ``mapInArrow``, normalises, splits, hashes every word and combines the word hashes into
    every word 5-shingle hash (``normalize_texts`` + ``word_batch`` + ``combine_word_hashes``),
    returning only counts: the read + tokenise + hash floor.

    ``neardup-minhash``, ``neardup-simhash``: ``neardup dedupe CORPUS OUT --method M --master
    MASTER --threshold T --overwrite``, all outputs written; ``stage_seconds`` are collected.

    ``spark-mllib``: ``RegexTokenizer`` (lower-cases, splits on runs of characters that are not
    letters, digits or marks: the project's punctuation rule without NFKC/casefold),
    ``NGram(n=5)``, ``HashingTF(numFeatures=2**24, binary=True)``,
    ``MinHashLSH(numHashTables=5)`` fitted as one ``Pipeline``; the transformed
    ``(id, features, hashes)`` persisted (the join reads it twice) and
    ``approxSimilarityJoin(df, df, 1 - threshold)`` keeping ``doc_a < doc_b``; the pairs
    written as Parquet (``doc_a``, ``doc_b``, ``similarity`` = 1 - MLlib's distance). Documents
    with fewer than 5 tokens are dropped first (MLlib rejects empty vectors); the bench counts
    them afterwards with the same regex in PyArrow (outside the timed process). The CLI's Spark
    session (``build_session``: ``local[2]``, 2 GB driver), with adaptive execution on and 8
    shuffle partitions (:data:`MLLIB_SPARK`: its better settings). Skipped above
    ``--mllib-max-docs``.

    ``datasketch``: one Python process; per document the distinct word 5-shingles of the
    project's normalised text (a shorter document is one shingle of all its words, as in
    neardup; an empty one is skipped), ``MinHash(num_perm=200)`` via ``MinHash.generator``
    (datasketch's bulk path, default SHA-1 hashing), then ``MinHashLSH(threshold,
    num_perm=200)``: ``query`` then ``insert``; every returned key is a pair (no verification,
    as the LSH index is normally used). Skipped above ``--datasketch-max-docs``.

Sizes and corpora
    ``--docs 10000,30000,100000`` by default; ``--docs 1000000`` is an optional size
    (spark-mllib and datasketch are skipped above their maximum, 100,000 by default). Each size
    is generated once with ``neardup generate WORKDIR/corpora/docs-N-seed-S --docs N --seed S``
    and reused while its ``bench-corpus.json`` names the same size and seed.

Derived numbers
    *growth exponent* of a row between consecutive sizes ``n1 < n2``:
    ``log(t2 / t1) / log(n2 / n1)`` on work seconds (1.0 = linear). *x floor*, *x mllib*: the
    row's docs/s (work) over the ``floor`` / ``spark-mllib`` row's at the same size;
    *x mllib wall*: the same on whole-process wall seconds (JVM start included).

A failed or timed-out row (``--timeout`` seconds, whole process group killed) is recorded with
its error and the bench goes on. ``results.json`` is rewritten after every row.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import json
import logging
import math
import os
import platform
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neardup_spark.bench.processes import (
    child_env,
    neardup_command,
    run_measured,
)
from neardup_spark.quality.tables import markdown_table

log = logging.getLogger(__name__)

ROWS = ("floor", "neardup-minhash", "neardup-simhash", "spark-mllib", "datasketch")
SPARK_ROWS = frozenset({"floor", "neardup-minhash", "neardup-simhash", "spark-mllib"})
NEARDUP_ROWS = {"neardup-minhash": "minhash", "neardup-simhash": "simhash"}
DEFAULT_DOCS = "10000,30000,100000"
DEFAULT_WORKDIR = "out/bench"
DEFAULT_SEED = 1
DEFAULT_THRESHOLD = 0.8
DEFAULT_MASTER = "local[2]"
DEFAULT_TIMEOUT = 900.0
DEFAULT_MLLIB_MAX_DOCS = 100_000
DEFAULT_DATASKETCH_MAX_DOCS = 100_000
NGRAM = 5
NUM_PERM = 200
MLLIB_FEATURES = 1 << 24
MLLIB_TABLES = 5
# Java regex in RegexTokenizer and RE2 in PyArrow read these Unicode classes alike.
MLLIB_TOKEN_GAPS = r"[^\p{L}\p{N}\p{M}]+"
DATASKETCH_BATCH = 2000
# Exact Jaccard (precision) is measured on at most this many distinct pairs per row: all of
# them at the default sizes except for rows that report many pairs (e.g. SimHash).
PRECISION_SAMPLE = 100_000
STATS_FILE = "stats.json"
CORPUS_MARKER = "bench-corpus.json"
GB = 1024**3
_SPARK_START = re.compile(r"\(\+ ([0-9.]+) s Spark start-up\)")


# --------------------------------------------------------------------------------------------
# Process-tree memory


# --------------------------------------------------------------------------------------------
# Pure numbers


def growth_exponent(n1: float, t1: float | None, n2: float, t2: float | None) -> float | None:
    """``log(t2 / t1) / log(n2 / n1)``: how time grows with size (1.0 = linear).

    >>> growth_exponent(10_000, 2.0, 100_000, 20.0)
    1.0
    """
    if t1 is None or t2 is None or t1 <= 0 or t2 <= 0 or n1 <= 0 or n2 <= 0 or n1 == n2:
        return None
    return math.log(t2 / t1) / math.log(n2 / n1)


def ratio(value: float | None, reference: float | None) -> float | None:
    """``value / reference``, None when either is missing or the reference is 0."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def unique_pairs(a: Any, b: Any) -> tuple[Any, Any, Any]:
    """Order-free distinct pairs of document indices, self-pairs dropped.

    Returns ``(lo, hi, first)``: the pairs with ``lo < hi`` and, for each, the position of its
    first occurrence in the input.
    """
    import numpy as np

    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = np.flatnonzero(lo != hi)
    if keep.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    keys = np.stack([lo[keep], hi[keep]], axis=1)
    _, first = np.unique(keys, axis=0, return_index=True)
    first = np.sort(first)
    return lo[keep][first], hi[keep][first], keep[first]


def pair_quality(
    found_a: Any,
    found_b: Any,
    found_jaccard: Any,
    truth_a: Any,
    truth_b: Any,
    truth_jaccard: Any,
    threshold: float,
    n_docs: int,
) -> dict[str, Any]:
    """Precision and recall of found pairs against exact Jaccard and the truth.

    Documents are indices in ``range(n_docs)``. ``found_jaccard[i]`` is the exact Jaccard of
    found pair ``i``, NaN when it was not measured. Repeated pairs (either order) count once;
    self-pairs are ignored.

    * precision = measured distinct found pairs with exact Jaccard ``>= threshold`` / measured
      distinct found pairs (all of them, or a uniform sample: ``pairs_measured``);
    * recall = truth pairs with ``jaccard >= threshold`` whose documents lie in one connected
      component of all the found pairs (union-find) / truth pairs with ``jaccard >= threshold``.
    """
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    lo, hi, first = unique_pairs(found_a, found_b)
    sim = np.asarray(found_jaccard, dtype=np.float64)[first]
    measured = int((~np.isnan(sim)).sum())
    correct = int((sim >= threshold).sum())
    graph = coo_matrix((np.ones(lo.size, dtype=np.int8), (lo, hi)), shape=(n_docs, n_docs))
    _, labels = connected_components(graph, directed=False)
    ta = np.asarray(truth_a, dtype=np.int64)
    tb = np.asarray(truth_b, dtype=np.int64)
    positive = np.asarray(truth_jaccard, dtype=np.float64) >= threshold
    found = labels[ta[positive]] == labels[tb[positive]]
    positives = int(positive.sum())
    return {
        "pairs": int(lo.size),
        "pairs_measured": measured,
        "pairs_correct": correct,
        "precision": correct / measured if measured else None,
        "positives": positives,
        "positives_found": int(found.sum()),
        "recall": float(found.sum()) / positives if positives else None,
    }


# --------------------------------------------------------------------------------------------
# Results table


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


MAIN_HEADERS = (
    "docs",
    "row",
    "wall s",
    "JVM start s",
    "work s",
    "docs/s",
    "x floor",
    "x mllib",
    "x mllib wall",
    "growth",
    "peak GB",
    "pairs",
    "recall",
    "precision",
    "status",
)


def _status(row: dict[str, Any]) -> str:
    status = str(row.get("status", "?"))
    if status == "ok":
        return status
    reason = str(row.get("error") or "").replace("|", "/").splitlines()
    return f"{status}: {reason[0][:70]}" if reason else status


def main_table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per (size, row): the benchmark table."""
    cells = []
    for r in rows:
        peak = r.get("peak_rss_bytes")
        cells.append(
            [
                _fmt(r["docs"]),
                str(r["row"]),
                _fmt(r.get("wall_seconds"), 1),
                _fmt(r.get("spark_start_seconds"), 1),
                _fmt(r.get("work_seconds"), 1),
                _fmt(None if r.get("docs_per_second") is None else round(r["docs_per_second"])),
                _fmt(r.get("vs_floor")),
                _fmt(r.get("vs_mllib")),
                _fmt(r.get("vs_mllib_wall")),
                _fmt(r.get("growth_exponent")),
                _fmt(None if not peak else peak / GB),
                _fmt(r.get("pairs")),
                _fmt(r.get("recall"), 4),
                _fmt(r.get("precision"), 4),
                _status(r),
            ]
        )
    return markdown_table(MAIN_HEADERS, cells, right=set(range(2, 14)) | {0})


def stage_table(rows: Sequence[dict[str, Any]]) -> str:
    """``report.json`` ``stage_seconds`` of the neardup rows, one column per stage."""
    with_stages = [r for r in rows if r.get("stage_seconds")]
    if not with_stages:
        return ""
    stages: list[str] = []
    for r in with_stages:
        stages += [s for s in r["stage_seconds"] if s not in stages]
    headers = ["docs", "row", *stages, "sum", "work s"]
    cells = [
        [
            _fmt(r["docs"]),
            str(r["row"]),
            *(_fmt(r["stage_seconds"].get(s), 1) for s in stages),
            _fmt(float(sum(r["stage_seconds"].values())), 1),
            _fmt(r.get("work_seconds"), 1),
        ]
        for r in with_stages
    ]
    return markdown_table(headers, cells, right={0, *range(2, len(headers))})


def machine_line(machine: dict[str, Any]) -> str:
    ram = machine.get("ram_bytes")
    load = machine.get("load_average")
    return (
        f"Machine: {machine.get('cpu_model')}, {machine.get('cores')} cores, "
        f"{_fmt(None if ram is None else ram / GB, 1)} GiB RAM; Python {machine.get('python')}, "
        f"Spark {machine.get('spark')}, Java {machine.get('java')}, "
        f"datasketch {machine.get('datasketch')}; {machine.get('date')}"
        + (f"; load average at start {load}" if load else "")
    )


def format_markdown(results: dict[str, Any]) -> str:
    """The whole Markdown report: machine line, settings, the table, neardup stage times."""
    s = results.get("settings", {})
    lines = [
        "## neardup bench",
        "",
        machine_line(results.get("machine", {})),
        "",
        f"Settings: master {s.get('master')}, threshold {s.get('threshold')}, corpus seed "
        f"{s.get('seed')}, sizes {', '.join(f'{n:,}' for n in s.get('docs', []))}; "
        f"total bench wall {_fmt(results.get('total_seconds'), 0)} s; JVM class archive "
        f"{'on, for every Spark row' if s.get('jvm_archive') else 'off'}.",
        "",
        main_table(results.get("rows", [])),
        "",
        "docs/s = docs / work s (JVM start excluded); x floor / x mllib = docs/s over the "
        "floor / spark-mllib row's at the same size; x mllib wall = the same on whole-process "
        "wall s; growth = log(t2/t1)/log(n2/n1) of work s from the previous size; peak GB = max "
        "summed RSS of the row's process tree (JVM and Python workers included); recall = truth "
        "pairs with J >= threshold connected by the found pairs; precision = found pairs with "
        "exact J >= threshold.",
    ]
    stages = stage_table(results.get("rows", []))
    if stages:
        lines += ["", "neardup stage seconds (report.json):", "", stages]
    notes = [
        f"- {r['docs']:,} {r['row']}: {r['note']}" for r in results.get("rows", []) if r.get("note")
    ]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Machine


def _java_version() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else "java"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "([^"]+)"', done.stderr + done.stdout)
    return match.group(1) if match else None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """CPU model, cores, RAM, Python/Spark/Java/datasketch versions, date, load."""
    cpu = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
                break
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_model": cpu or platform.processor() or None,
        "cores": os.cpu_count(),
        "ram_bytes": ram,
        "python": platform.python_version(),
        "spark": _version("pyspark"),
        "java": _java_version(),
        "datasketch": _version("datasketch"),
        "numpy": _version("numpy"),
        "pyarrow": _version("pyarrow"),
        "kernel": platform.release(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average": load,
    }


# --------------------------------------------------------------------------------------------
# Arguments


# --------------------------------------------------------------------------------------------
# Corpora


@dataclass(frozen=True)
class Corpus:
    docs: int
    root: Path

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"

    @property
    def truth(self) -> Path:
        return self.root / "truth"


def ensure_corpus(workdir: Path, docs: int, seed: int, timeout: float | None) -> dict[str, Any]:
    """Generate ``docs`` documents once (``neardup generate``); reuse a matching one."""
    root = workdir / "corpora" / f"docs-{docs}-seed-{seed}"
    marker = root / CORPUS_MARKER
    from neardup_spark.quality.generate import ROW_GROUP_ROWS

    # The layout is part of what is measured (input splits): a corpus written otherwise is redone.
    wanted = {"docs": docs, "seed": seed, "row_group_rows": ROW_GROUP_ROWS}
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(marker.read_text())
        same = {k: found.get(k) for k in wanted} == wanted
        if same and (root / "corpus").is_dir() and (root / "truth").is_dir():
            return {"path": str(root), "docs": docs, "reused": True, "seconds": 0.0}
    command = [*neardup_command(), "generate", str(root), "--docs", str(docs)]
    command += ["--seed", str(seed), "--overwrite"]
    started = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=child_env(), check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"`{shlex.join(command)}` failed:\n{done.stderr[-2000:]}")
    seconds = time.perf_counter() - started
    marker.write_text(json.dumps({**wanted, "generated_seconds": round(seconds, 2)}) + "\n")
    return {"path": str(root), "docs": docs, "reused": False, "seconds": round(seconds, 2)}


# --------------------------------------------------------------------------------------------
# The children: floor, spark-mllib, datasketch (run as ``neardup bench-row``)


def _write_stats(path: str, stats: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(stats, indent=2) + "\n")


def _xor(hashes: Any) -> int:
    import numpy as np

    return int(np.bitwise_xor.reduce(hashes.view(np.int64))) if hashes.size else 0


def floor_batch_fn(ngram: int, seed: int, options: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow function of the floor: normalise, hash every shingle, return counts only."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from neardup_spark.kernels.normalize import normalize_texts
        from neardup_spark.kernels.shingles import combine_word_hashes, word_batch

        for batch in batches:
            words = word_batch(normalize_texts(batch.column(0), options), seed)
            offsets, hashes = combine_word_hashes(words, ngram)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([batch.num_rows], pa.int64()),
                    pa.array([int(words.offsets[-1])], pa.int64()),
                    pa.array([int(offsets[-1])], pa.int64()),
                    # A checksum of the hashes, so that every one of them is really used.
                    pa.array([_xor(hashes)], pa.int64()),
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
) -> tuple[Any, float]:
    from neardup_spark.config import SessionSettings
    from neardup_spark.runtime.session import build_session

    settings = SessionSettings(master=master, spark=dict(spark_settings or {}))
    started = time.perf_counter()
    spark = build_session(settings, app_name=app)
    return spark, time.perf_counter() - started


def child_floor(corpus: str, master: str) -> dict[str, Any]:
    """The read + tokenise + hash floor, in the CLI's Spark configuration."""
    from pyspark.sql import functions as F

    from neardup_spark.config import DedupeConfig

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
    from pyspark import StorageLevel
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import HashingTF, MinHashLSH, MinHashLSHModel, NGram, RegexTokenizer
    from pyspark.sql import functions as F

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
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from datasketch import MinHash, MinHashLSH

    from neardup_spark.kernels.normalize import normalize_texts

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


CHILD_ROWS = ("floor", "spark-mllib", "datasketch")


def run_child_row(row: str, corpus: str, output: str, master: str, threshold: float) -> None:
    """One row's process (``neardup bench-row ROW CORPUS OUT``): run it, write its stats."""
    Path(output).mkdir(parents=True, exist_ok=True)
    if row == "floor":
        stats = child_floor(corpus, master)
    elif row == "spark-mllib":
        stats = child_mllib(corpus, output, master, threshold)
    else:
        stats = child_datasketch(corpus, output, threshold)
    _write_stats(os.path.join(output, STATS_FILE), stats)


# --------------------------------------------------------------------------------------------
# Running one row


def row_command(row: str, corpus: Path, output: Path, args: argparse.Namespace) -> list[str]:
    """The command line of one row's process."""
    if row in NEARDUP_ROWS:
        return [
            *neardup_command(),
            "dedupe",
            str(corpus),
            str(output),
            "--method",
            NEARDUP_ROWS[row],
            "--master",
            args.master,
            "--threshold",
            str(args.threshold),
            "--overwrite",
        ]
    command = [*neardup_command(), "bench-row", row, str(corpus), str(output)]
    return [*command, "--master", args.master, "--threshold", str(args.threshold)]


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in kept if re.search(r"Error|Exception|error:", line)]
    return "\n".join((errors[-2:] if errors else []) + kept[-lines:])


def _remove_tree(path: Path) -> None:
    import shutil

    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def run_row(row: str, corpus: Corpus, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run one row in its own process and collect its timings (quality comes later)."""
    run_dir = workdir / "runs" / str(corpus.docs) / row
    output = run_dir / "output"
    log_path = run_dir / "log.txt"
    record: dict[str, Any] = {"docs": corpus.docs, "row": row, "status": "ok", "error": None}
    limits = {
        "spark-mllib": ("--mllib-max-docs", args.mllib_max_docs),
        "datasketch": ("--datasketch-max-docs", args.datasketch_max_docs),
    }
    if row in limits and corpus.docs > limits[row][1]:
        option, limit = limits[row]
        record.update(status="skipped", error=f"above {option} {limit:,}")
        return record
    _remove_tree(output)
    command = row_command(row, corpus.corpus, output, args)
    record.update(command=command, log=str(log_path), output=str(output))
    measured = run_measured(command, log_path, timeout=args.timeout, env=child_env())
    record.update(
        wall_seconds=round(measured.wall_seconds, 3),
        peak_rss_bytes=measured.peak_rss_bytes,
        rss_samples=measured.samples,
    )
    if measured.timed_out:
        record.update(status="timeout", error=f"timed out after {args.timeout:g} s")
        return record
    if measured.returncode != 0:
        record.update(status="failed", error=f"exit {measured.returncode}: {_tail(log_path)}")
        return record
    try:
        if row in NEARDUP_ROWS:
            report = json.loads((output / "report.json").read_text())
            match = _SPARK_START.search(log_path.read_text(errors="replace"))
            record.update(
                spark_start_seconds=float(match.group(1)) if match else None,
                work_seconds=float(report["wall_seconds"]),
                stage_seconds=report.get("stage_seconds", {}),
                counts=report.get("counts", {}),
            )
        else:
            stats = json.loads((output / STATS_FILE).read_text())
            record.update(
                spark_start_seconds=stats.get("spark_start_seconds"),
                work_seconds=float(stats["work_seconds"]),
                counts=stats.get("counts", {}),
            )
    except (OSError, ValueError, KeyError) as exc:
        record.update(status="failed", error=f"no timings: {exc}")
        return record
    if record["spark_start_seconds"] is not None:
        record["spark_start_seconds"] = round(record["spark_start_seconds"], 3)
    record["work_seconds"] = round(record["work_seconds"], 3)
    record["docs_per_second"] = corpus.docs / record["work_seconds"]
    record["docs_per_second_wall"] = corpus.docs / record["wall_seconds"]
    return record


# --------------------------------------------------------------------------------------------
# Quality


def _index_of(values: Any, universe: Any) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    values = pc.cast(values, pa.string())
    universe = pc.cast(universe, pa.string())
    index = pc.index_in(values, value_set=universe).fill_null(-1)
    return np.asarray(index.to_numpy(zero_copy_only=False), dtype=np.int64)


def _read_columns(path: Path, columns: Sequence[str]) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(str(path), format="parquet").to_table(columns=list(columns))


def exact_pair_jaccard(texts: Any, a: Any, b: Any) -> Any:
    """Exact Jaccard of word 5-shingle sets (default normalisation, the project's kernels) of
    the pairs ``(a[i], b[i])`` of row indices into ``texts``."""
    import numpy as np
    import pyarrow as pa

    from neardup_spark.quality.evaluate import shingle_matrix

    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.size == 0:
        return np.zeros(0, dtype=np.float64)
    involved, local = np.unique(np.concatenate([a, b]), return_inverse=True)
    matrix = shingle_matrix(texts.take(pa.array(involved)), NGRAM, seed=42)
    return matrix.jaccard(local[: a.size], local[a.size :])


def _mllib_dropped(texts: Any) -> int:
    """Documents with fewer than 5 tokens under the spark-mllib row's tokenizer."""
    import numpy as np
    import pyarrow.compute as pc

    tokens = pc.split_pattern_regex(pc.utf8_lower(texts.fill_null("")), pattern=MLLIB_TOKEN_GAPS)
    flat = pc.list_flatten(tokens)
    parents = pc.list_parent_indices(tokens)
    nonempty = pc.greater(pc.utf8_length(flat), 0)
    counts = np.bincount(
        parents.filter(nonempty).to_numpy(zero_copy_only=False), minlength=len(texts)
    )
    return int((counts < NGRAM).sum())


def _sample(size: int, limit: int, seed: int = 0) -> Any:
    """Sorted positions of a uniform sample of ``limit`` of ``range(size)`` (all if fewer)."""
    import numpy as np

    if size <= limit:
        return np.arange(size)
    return np.sort(np.random.default_rng(seed).choice(size, limit, replace=False))


def score_rows(
    records: list[dict[str, Any]],
    corpus: Corpus,
    threshold: float,
    precision_sample: int = PRECISION_SAMPLE,
) -> None:
    """Add pairs/recall/precision to the finished rows of one size (in place).

    Exact Jaccard is measured for every distinct pair of a row, or for a uniform sample of
    ``precision_sample`` of them when it found more; only the texts of the documents in
    measured pairs are read.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as ds

    dataset = ds.dataset(str(corpus.corpus), format="parquet")
    ids = dataset.to_table(columns=["id"]).column("id").combine_chunks()
    n = len(ids)
    truth = _read_columns(corpus.truth, ["doc_a", "doc_b", "jaccard"])
    ta = _index_of(truth.column("doc_a").combine_chunks(), ids)
    tb = _index_of(truth.column("doc_b").combine_chunks(), ids)
    tj = np.asarray(truth.column("jaccard").to_numpy(), dtype=np.float64)
    found: dict[int, tuple[Any, Any, Any]] = {}
    for i, r in enumerate(records):
        if r["status"] != "ok" or r["row"] == "floor":
            continue
        try:
            pairs = _read_columns(Path(r["output"]) / "pairs", ["doc_a", "doc_b"])
        except (OSError, pa.ArrowInvalid) as exc:
            r.update(status="failed", error=f"cannot read pairs: {exc}")
            continue
        pa_idx = _index_of(pairs.column("doc_a").combine_chunks(), ids)
        pb_idx = _index_of(pairs.column("doc_b").combine_chunks(), ids)
        r["pair_rows"] = int(pairs.num_rows)
        r["pairs_unknown_ids"] = int(((pa_idx < 0) | (pb_idx < 0)).sum())
        known = (pa_idx >= 0) & (pb_idx >= 0)
        lo, hi, _ = unique_pairs(pa_idx[known], pb_idx[known])
        found[i] = (lo, hi, _sample(lo.size, precision_sample))
    if found:
        # Every distinct measured pair of every row measured once, looked up by key per row.
        lo, hi, _ = unique_pairs(
            np.concatenate([f[0][f[2]] for f in found.values()]),
            np.concatenate([f[1][f[2]] for f in found.values()]),
        )
        involved, local = np.unique(np.concatenate([lo, hi]), return_inverse=True)
        texts = dataset.take(pa.array(involved), columns=["text"]).column("text").combine_chunks()
        local_a, local_b = local[: lo.size], local[lo.size :]
        keys = lo * n + hi
        order = np.argsort(keys)
        keys, sims = keys[order], exact_pair_jaccard(texts, local_a, local_b)[order]
        del texts
        for i, (a, b, measured) in found.items():
            pair_sims = np.full(a.size, np.nan)
            if keys.size and measured.size:
                wanted = a[measured] * n + b[measured]
                pos = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
                pair_sims[measured] = np.where(keys[pos] == wanted, sims[pos], np.nan)
            quality = pair_quality(a, b, pair_sims, ta, tb, tj, threshold, n)
            records[i].update(
                pairs=quality["pairs"],
                recall=quality["recall"],
                precision=quality["precision"],
                quality=quality,
            )
            if quality["pairs_measured"] < quality["pairs"]:
                _add_note(
                    records[i],
                    f"precision measured on a uniform sample of {quality['pairs_measured']:,} "
                    f"of {quality['pairs']:,} distinct pairs",
                )
    for r in records:
        if r["row"] == "spark-mllib" and r["status"] == "ok":
            r["mllib_dropped_docs"] = _mllib_dropped_in(dataset)
            _add_note(
                r,
                f"{r['mllib_dropped_docs']:,} documents under {NGRAM} tokens dropped before "
                "hashing (MLlib rejects empty vectors)",
            )
        if r["row"] in NEARDUP_ROWS and r["status"] == "ok":
            r["evaluate"] = _evaluate_neardup(r["output"], corpus, threshold)


def _add_note(record: dict[str, Any], note: str) -> None:
    record["note"] = f"{record['note']}; {note}" if record.get("note") else note


def _mllib_dropped_in(dataset: Any) -> int:
    return sum(
        _mllib_dropped(batch.column(0))
        for batch in dataset.to_batches(columns=["text"], batch_size=20_000)
    )


def _evaluate_neardup(output: str, corpus: Corpus, threshold: float) -> dict[str, Any]:
    from neardup_spark.errors import UserError
    from neardup_spark.quality.evaluate import evaluate

    try:
        result = evaluate(output, truth=str(corpus.truth), threshold=threshold)
    except (UserError, OSError, ValueError) as exc:
        return {"error": str(exc)}
    truth = result["truth"] or {}
    return {
        "recall": truth.get("recall"),
        "precision": truth.get("precision"),
        "precision_basis": truth.get("precision_basis"),
        "ari": truth.get("ari"),
        "positives": truth.get("positives"),
        "positives_found": truth.get("positives_found"),
        "reported_pairs": truth.get("reported_pairs"),
    }


# --------------------------------------------------------------------------------------------
# Derived numbers and the run


def derive(rows: list[dict[str, Any]]) -> None:
    """Growth exponents and ratios against floor and spark-mllib (in place)."""
    ok = {(r["docs"], r["row"]): r for r in rows if r.get("status") == "ok"}
    sizes = sorted({r["docs"] for r in rows})
    for r in rows:
        for key in ("growth_exponent", "vs_floor", "vs_mllib", "vs_mllib_wall"):
            r[key] = None
        if r.get("status") != "ok":
            continue
        earlier = [n for n in sizes if n < r["docs"] and (n, r["row"]) in ok]
        if earlier:
            prev = ok[(earlier[-1], r["row"])]
            r["growth_exponent"] = growth_exponent(
                prev["docs"], prev["work_seconds"], r["docs"], r["work_seconds"]
            )
            r["growth_from_docs"] = prev["docs"]
        floor = ok.get((r["docs"], "floor"))
        mllib = ok.get((r["docs"], "spark-mllib"))
        if floor:
            r["vs_floor"] = ratio(r["docs_per_second"], floor["docs_per_second"])
        if mllib:
            r["vs_mllib"] = ratio(r["docs_per_second"], mllib["docs_per_second"])
            r["vs_mllib_wall"] = ratio(r["docs_per_second_wall"], mllib["docs_per_second_wall"])


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def ensure_jvm_archive() -> dict[str, Any] | None:
    """Build the local JVM class archive (:mod:`neardup_spark.bench.jvm_archive`) before any row
    runs, so every Spark row (floor, neardup, MLlib) maps the same one; None when it is off."""
    from neardup_spark.bench import jvm_archive as archive_builder
    from neardup_spark.runtime import jvm_archive

    path = jvm_archive.archive_path()
    if path is None:
        return None
    started = time.perf_counter()
    existed = path.is_file()
    try:
        archive_builder.build(path)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        log.warning("no JVM class archive (%s); the rows run without one", exc)
        return None
    built = None if existed else round(time.perf_counter() - started, 1)
    return {"path": str(path), "built_seconds": built}
