"""``neardup decontaminate CORPUS --reference REF OUTPUT``: benchmark items found in a corpus,
and the corpus without them.

One call per step, each with its two implementations side by side (the same per-batch
functions of :mod:`neardup_spark.batch.decontaminate`, here on the driver's Arrow batches or in
Spark's ``mapInArrow``):

1. ``reference``  the items read on the driver and their n-grams built (:mod:`..io.reference`);
2. ``hits``       the corpus's texts tokenised, once: one small row per occurrence of a
                  reference n-gram in a document, keyed by a row key unique to the run, and the
                  documents counted;
3. ``common``     the documents holding each reference n-gram counted from the hits; those in
                  more than ``max_ngram_docs`` are dropped;
4. ``matches``    matches/: one row per (document, item) found, with merged spans, from the hits;
5. ``clean``      clean/: the corpus without the contaminated documents, or with their spans cut;
                  only the rows whose id is a contaminated document's are tokenised again (and
                  judged on their own text, so repeated ids do no harm).

Where the corpus pass runs is decided once (:func:`decide_corpus_pass`): in this process when
the corpus is local Parquet in local mode within ``driver_max_bytes``, else as Spark jobs.
OUTPUT is staged and committed as a dedupe's (:mod:`neardup_spark.io.output`).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark import __version__
from neardup_spark.batch.decontaminate import (
    DOC_ID,
    GRAM,
    ROWS,
    KeyedRowGroup,
    Reference,
    build_reference,
    clean_rows_fn,
    common_grams,
    documents_of,
    hit_matches,
    hit_rows,
)
from neardup_spark.config.decontaminate import DecontaminateConfig
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import (
    ListedInput,
    check_columns,
    check_paths_apart,
    list_input,
    read_corpus,
)
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT
from neardup_spark.io.output import REPORT_FILE, OutputDir, OutputLayout
from neardup_spark.io.paths import is_local_path, local_path
from neardup_spark.io.reference import ReferenceItems, read_reference
from neardup_spark.pipeline.decontaminate_report import report_section
from neardup_spark.pipeline.decontaminate_tasks import (
    clean_in_tasks,
    hits_in_tasks,
    keyed_row_groups,
)
from neardup_spark.pipeline.facts import engine_facts
from neardup_spark.pipeline.plan import DRIVER, SPARK, Choice, mb
from neardup_spark.pipeline.reporting import StageTimer
from neardup_spark.runtime.spark_compat import from_arrow, to_arrow
from neardup_spark.stages.decontaminate import (
    GRAM_DOCS,
    contamination_hits,
    decontaminated,
    gram_docs,
    hit_matches_stage,
)

log = logging.getLogger(__name__)

MATCHES, CLEAN = "matches", "clean"
# The hit rows of a Spark corpus pass, under the run's staging directory (not committed).
HITS = "_hits"
DECONTAMINATE_LAYOUT = OutputLayout(
    committed=(MATCHES, CLEAN, REPORT_FILE), extra=("report.html",), kind="decontamination run"
)
# Tasks per core of a Spark pass whose tasks read the local Parquet row groups themselves.
TASKS_PER_THREAD = 4
# Rows per Arrow batch of the driver's pass (Spark's default maxRecordsPerBatch).
DRIVER_BATCH_ROWS = 10_000


def load_reference(
    paths: list[str], config: DecontaminateConfig
) -> tuple[Reference, ReferenceItems]:
    """The reference read and its n-grams built; an item without words is a
    :class:`UserError` naming it."""
    items = read_reference(paths, config.reference_id_col, config.reference_fields)
    try:
        return build_reference(items.texts, items.ids, items.benchmarks, config.ngram), items
    except ValueError as exc:
        position = int(str(exc).split()[2])
        raise UserError(
            f"reference item {items.ids[position].as_py()!r} of {items.benchmarks[position]} "
            "has no text (no words in its fields)"
        ) from None


def decide_corpus_pass(listed: ListedInput, local_threads: int, limit: int) -> Choice:
    """The corpus pass in this process (local Parquet files, local mode, at most ``limit``
    bytes) or as Spark jobs."""
    step = "corpus"
    if listed.format != "parquet" or listed.source.table is not None:
        return Choice(step, SPARK, f"input format {listed.format or 'table'}", (SPARK,))
    if not local_threads:
        return Choice(step, SPARK, "tasks run on other machines", (SPARK,))
    if not all(is_local_path(f) for f in listed.files):
        return Choice(step, SPARK, "input files not on this machine", (SPARK,))
    root = len(local_path(listed.path).rstrip("/"))
    if listed.is_dir and any("=" in local_path(f)[root:] for f in listed.files):
        return Choice(step, SPARK, "partition directories (name=value)", (SPARK,))
    size = sum(os.path.getsize(local_path(f)) for f in listed.files)
    why = f"input {mb(size)} {'<=' if size <= limit else '>'} driver_max_bytes {mb(limit)}"
    return Choice(step, DRIVER if size <= limit else SPARK, why, (DRIVER, SPARK))


def check_text_type(name: str, is_string: bool, shown: str) -> None:
    """Spans are offsets in a string: a binary text column is refused."""
    if not is_string:
        raise UserError(f"the text column {name!r} has type {shown}; decontaminate needs strings")


@dataclass
class PassResult:
    """What a corpus pass found: documents read, the common grams dropped, documents left in
    clean/, and the matches' report columns (Arrow)."""

    documents: int
    common: int
    clean_rows: int
    matches: pa.Table


def kept_reference(ref: Reference, common: np.ndarray) -> Reference:
    """``ref`` without its ``common`` grams (reference indices)."""
    return Reference(ref.grams.without(ref.grams.hashes[common]), ref.item_ids, ref.benchmarks)


def contaminated_ids(found: pa.Table) -> pa.Array:
    """The distinct ids of matches/'s documents."""
    return pc.unique(found.column(DOC_ID).combine_chunks())


def driver_pass(
    listed: ListedInput,
    ref: Reference,
    config: DecontaminateConfig,
    staged: OutputDir,
    timer: StageTimer,
) -> PassResult:
    """Every step on this process's Arrow batches of the local Parquet corpus."""
    table = pq.read_table([local_path(f) for f in listed.files])
    missing = [c for c in (config.id_col, config.text_col) if c not in table.column_names]
    if missing:
        raise UserError(
            f"the column {missing[0]!r} is not in the input; columns present: "
            f"{', '.join(table.column_names)}. Choose it with --id-col / --text-col."
        )
    text_type = table.schema.field(config.text_col).type
    check_text_type(
        config.text_col,
        pa.types.is_string(text_type) or pa.types.is_large_string(text_type),
        str(text_type),
    )
    batches = table.to_batches(max_chunksize=DRIVER_BATCH_ROWS) or [
        pa.RecordBatch.from_pylist([], schema=table.schema)
    ]
    starts = np.cumsum([0] + [b.num_rows for b in batches])
    with timer.stage("hits"):
        hits = pa.Table.from_batches(
            [
                hit_rows(ref, b, start + np.arange(b.num_rows), config.id_col, config.text_col)
                for b, start in zip(batches, starts.tolist(), strict=False)
            ]
        )
    with timer.stage("common"):
        common = common_grams(hits, config.max_ngram_docs)
    with timer.stage("matches"):
        found = pa.Table.from_batches([hit_matches(ref, hits, common)])
        os.makedirs(local_path(staged.child(MATCHES)), exist_ok=True)
        pq.write_table(found, local_path(staged.child(f"{MATCHES}/part-00000.parquet")))
    clean = clean_rows_fn(
        kept_reference(ref, common),
        config.id_col,
        config.text_col,
        config.cut_spans,
        config.cut_margin,
        config.min_chars,
        contaminated_ids(found),
    )
    os.makedirs(local_path(staged.child(CLEAN)), exist_ok=True)
    clean_rows = 0
    with (
        timer.stage("clean"),
        pq.ParquetWriter(
            local_path(staged.child(f"{CLEAN}/part-00000.parquet")), table.schema
        ) as w,
    ):
        for batch in batches:  # written as cleaned: one batch's copy in memory at a time
            cleaned = clean(batch)
            clean_rows += cleaned.num_rows
            w.write_batch(cleaned)
    return PassResult(documents_of(hits), len(common), clean_rows, found)


def spark_pass(
    spark: SparkSession,
    df: DataFrame,
    ref: Reference,
    config: DecontaminateConfig,
    staged: OutputDir,
    timer: StageTimer,
    runs: list[list[KeyedRowGroup]] | None = None,
) -> PassResult:
    """Every step as Spark jobs over the corpus ``df``: its texts tokenised once, into hit rows
    written under the staging directory (``runs``: row groups its tasks read themselves, else
    ``df`` read by Spark); counts and matches from them; clean/ in a second read that
    tokenises only the contaminated documents' rows."""
    with timer.stage("hits"):
        if runs is None:
            hit_rows_df = df.transform(contamination_hits(ref, config.id_col, config.text_col))
        else:
            hit_rows_df = hits_in_tasks(spark, df, ref, config, runs)
        hit_rows_df.write.parquet(staged.child(HITS))
    with timer.stage("common"):
        hits = spark.read.parquet(staged.child(HITS))
        counted = hits.transform(gram_docs)
        limit = config.max_ngram_docs
        over = to_arrow(counted.where((F.col(GRAM_DOCS) > limit) | (F.col(GRAM) < 0)))
        gram = over.column(GRAM).to_numpy()
        read = int(np.sum(over.column(ROWS).to_numpy()[gram < 0]))
        common = np.sort(gram[gram >= 0].astype(np.int64))
    with timer.stage("matches"):
        hits.transform(hit_matches_stage(ref, common)).write.parquet(staged.child(MATCHES))
        found = to_arrow(spark.read.parquet(staged.child(MATCHES)))
    clean = decontaminated(  # (lazy: used when Spark reads the corpus)
        kept_reference(ref, common),
        config.id_col,
        config.text_col,
        config.cut_spans,
        config.cut_margin,
        config.min_chars,
        from_arrow(spark, pa.table({DOC_ID: contaminated_ids(found)})),
    )
    with timer.stage("clean"):
        if runs is None:
            df.transform(clean).write.parquet(staged.child(CLEAN))
            clean_rows = spark.read.parquet(staged.child(CLEAN)).count()
        else:
            kept = kept_reference(ref, common)
            rows_fn = clean_rows_fn(
                kept,
                config.id_col,
                config.text_col,
                config.cut_spans,
                config.cut_margin,
                config.min_chars,
                contaminated_ids(found),
            )
            clean_rows = clean_in_tasks(spark, runs, rows_fn, staged.child(CLEAN))
    return PassResult(read, len(common), clean_rows, found)


def corpus_plan(
    spark: SparkSession, listed: ListedInput, config: DecontaminateConfig, where: str | None
) -> tuple[Choice, dict[str, dict[str, str]], list[list[KeyedRowGroup]] | None]:
    """Where the corpus pass runs (``where``: given), the plan as report.json records it, and
    for a Spark pass over local Parquet the row groups each task reads itself."""
    threads = engine_facts(spark).local_threads
    choice = decide_corpus_pass(listed, threads, config.driver_max_bytes)
    if where is not None:
        if where not in choice.feasible:
            raise UserError(f"the corpus pass cannot run on the {where} here ({choice.why})")
        choice = Choice(choice.step, where, "given", choice.feasible)
    plan = {choice.step: {"where": choice.where, "why": choice.why}}
    if choice.where != SPARK:
        return choice, plan, None
    if DRIVER in choice.feasible and config.task_reads:
        runs, groups = keyed_row_groups(listed, TASKS_PER_THREAD * threads)
        why = f"{len(groups):,} local Parquet row groups read by {len(runs)} tasks"
        plan["hits"] = {"where": "tasks", "why": why}
        return choice, plan, runs
    why = "task_reads off" if DRIVER in choice.feasible else choice.why
    plan["hits"] = {"where": SPARK, "why": why}
    return choice, plan, None


def run_decontaminate(
    spark: SparkSession,
    corpus: str,
    reference: list[str],
    output: str,
    config: DecontaminateConfig,
    overwrite: bool = False,
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    where: str | None = None,
) -> dict[str, Any]:
    """Find the reference's items in ``corpus`` and write OUTPUT (matches/, clean/,
    report.json), staged then committed holding OUTPUT's lease. ``where``: the corpus pass's
    place (``driver`` or ``spark``), else decided. Returns the report."""
    check_paths_apart({"input": corpus, "output": output})
    for path in reference:
        check_paths_apart({"reference": path, "output": output})
    started = time.perf_counter()
    timer = StageTimer()
    with timer.stage("reference"):
        ref, items = load_reference(reference, config)
    listed = list_input(spark, corpus)
    choice, plan, runs = corpus_plan(spark, listed, config, where)
    log.info("plan: %s", plan)
    out = OutputDir(spark, output, DECONTAMINATE_LAYOUT)
    with out.locked(lock_timeout):
        out.prepare(overwrite)
        run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]
        staged = out.claim_staging(run_id)
        with timer.stage("corpus"):
            if choice.where == DRIVER:
                result = driver_pass(listed, ref, config, staged, timer)
            else:
                df, _ = read_corpus(spark, corpus, False, (config.id_col, config.text_col), listed)
                check_columns(df, config.id_col, config.text_col)
                text_type = df.schema[config.text_col].dataType
                check_text_type(
                    config.text_col, isinstance(text_type, T.StringType), text_type.simpleString()
                )
                result = spark_pass(spark, df, ref, config, staged, timer, runs)
        report = {
            "neardup_spark_version": __version__,
            "run_id": run_id,
            "input": corpus,
            "reference": list(items.files),
            "output": out.path,
            "config": config.to_dict(),
            "plan": plan,
            **report_section(
                result.matches, items, ref, result.documents, result.clean_rows, config
            ),
            "common_ngrams_dropped": result.common,
            "stage_seconds": timer.seconds,
            "wall_seconds": round(time.perf_counter() - started, 3),
        }
        staged.write_json(REPORT_FILE, report)
        manifest = {"run_id": run_id, "neardup_spark_version": __version__, "input": corpus}
        out.commit(staged, manifest, required=(MATCHES, CLEAN))
    return report
