"""The boilerplate step: count each unit's documents, decide which units are boilerplate,
and clean the texts; both ``neardup boilerplate`` (:func:`run_boilerplate`) and ``dedupe
--strip-boilerplate`` (:func:`strip_boilerplate`, before the per-document pass) use it.

The step acts twice: one job counts the units (a pass over the texts, then a Spark
aggregation) and collects the boilerplate set to the driver, which ships it to the cleaning
pass with the pass's function (Spark sends a large one to the executors once, as a broadcast
would; Spark Connect has no broadcast variables); a set above
``boilerplate.broadcast_max_units`` is joined to the documents instead. The cleaning pass
itself runs inside the caller's next action (the write, or the dedupe's per-document pass),
where its counts and the examples of the report's units are aggregated.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from neardup_spark import __version__
from neardup_spark.batch.boilerplate import BoilerplateSet, Examples
from neardup_spark.columns import DOC_A, DOC_B, DOC_ID, KEEPER, TEXT, UNIT_DOCS, UNIT_KEY
from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.io.corpus import (
    check_columns,
    check_ids,
    check_paths_apart,
    files_read,
    read_corpus,
)
from neardup_spark.io.footer_rows import check_rows_read, footer_rows
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT
from neardup_spark.io.output import OutputDir, OutputLayout
from neardup_spark.pipeline.execution import grouped_input, run_alongside, start_python_workers
from neardup_spark.pipeline.reporting import StageTimer
from neardup_spark.runtime.faults import batch_faults, pause_if_asked
from neardup_spark.runtime.session import keep_column_types, spark_section
from neardup_spark.runtime.spark_compat import to_arrow
from neardup_spark.stages.boilerplate import (
    COUNT_HELPERS,
    EXAMPLES,
    boilerplate_units,
    check_boilerplate_columns,
    cleaned_document_features,
    count_columns,
    drop_lists,
    example_columns,
    examples_of,
    stripped_texts,
    unit_documents,
)
from neardup_spark.stages.names import column

# The units report.json lists, most documents first.
TOP_UNITS = 50
# Where the cleaned corpus's data files are staged before the commit moves them into OUTPUT.
STAGED_DATA_DIR = "data"
BOILERPLATE_REPORT = "_report.json"
# OUTPUT of `neardup boilerplate` is the cleaned corpus itself: data files at the top level,
# the report, manifest and _SUCCESS beside them (names starting with "_", which readers skip).
BOILERPLATE_LAYOUT = OutputLayout(
    committed=(BOILERPLATE_REPORT,),
    kind="boilerplate run",
    data_dir=STAGED_DATA_DIR,
    manifest="_manifest.json",
)


@dataclass
class FoundBoilerplate:
    """What the counting job found: the boilerplate table (persisted), its size, the most
    repeated units, and the set the cleaning pass uses (only the example keys when the table
    is joined instead)."""

    table: DataFrame
    units: int
    joined: bool
    top: list[dict[str, Any]]
    found: BoilerplateSet

    def boilerplate_set(self) -> Callable[[], BoilerplateSet]:
        """A function returning the set on an executor; it captures the set only, never this
        object's DataFrame."""
        return functools.partial(_the_set, self.found)

    @property
    def example_keys(self) -> list[int]:
        """The report's units (signed 64-bit keys, as Spark holds them)."""
        return [int(row["key"]) for row in self.top]

    def release(self) -> None:
        self.table.unpersist()


def _the_set(found: BoilerplateSet) -> BoilerplateSet:
    return found


def _sorted_set(table: pa.Table) -> tuple[np.ndarray, pa.Array | None]:
    """The boilerplate keys, sorted (uint64), and in repeats mode their keepers alongside."""
    keys = table.column(UNIT_KEY).to_numpy().view(np.uint64)
    order = np.argsort(keys, kind="stable")
    keepers = table.column(KEEPER).take(pa.array(order)) if KEEPER in table.column_names else None
    return keys[order], keepers


def find_boilerplate(df: DataFrame, config: DedupeConfig, timer: StageTimer) -> FoundBoilerplate:
    """Count the documents of every unit of ``df``'s texts, keep the boilerplate units and
    broadcast them (timed as ``boilerplate``)."""
    table = df.transform(boilerplate_units(config)).persist(StorageLevel.MEMORY_AND_DISK)
    with timer.stage("boilerplate") as counted:
        units = counted["rows"] = table.count()
        joined = units > config.boilerplate.broadcast_max_units
        keys, keepers = np.zeros(0, dtype=np.uint64), None
        if joined:
            top = to_arrow(table.orderBy(F.desc(UNIT_DOCS), UNIT_KEY).limit(TOP_UNITS))
        else:
            collected = to_arrow(table)
            signed = collected.column(UNIT_KEY).to_numpy()
            order = np.lexsort((signed, -collected.column(UNIT_DOCS).to_numpy()))
            top = collected.take(pa.array(order[:TOP_UNITS]))
            keys, keepers = _sorted_set(collected)
    top_keys = top.column(UNIT_KEY).to_numpy()
    found = BoilerplateSet(keys, keepers, np.sort(top_keys.view(np.uint64)))
    rows = [
        {"key": int(k), "documents": int(d)}
        for k, d in zip(top_keys.tolist(), top.column(UNIT_DOCS).to_pylist(), strict=True)
    ]
    return FoundBoilerplate(table, units, joined, rows, found)


def boilerplate_section(
    config: DedupeConfig, found: FoundBoilerplate, counts: dict[str, int], examples: Examples
) -> dict[str, Any]:
    """A report's ``boilerplate`` section: settings, counts, the most repeated units."""
    top = []
    for row in found.top:
        text, group = examples.get(row["key"], (None, None))
        entry: dict[str, Any] = {"text": text, "documents": row["documents"]}
        if config.boilerplate.group_col:
            entry["group"] = group
        top.append(entry)
    return {
        "settings": {**dataclasses.asdict(config.boilerplate), "text_col": config.text_col},
        "joined": found.joined,
        "counts": {**counts, "boilerplate_units": found.units},
        "top_units": top,
    }


@dataclass
class Cleaning:
    """The cleaned rows (``cleaned``: every input row, text without boilerplate, the boilerplate
    columns; ``observed``: the same, counting as the caller's action reads it) and what the
    report needs once that action has run."""

    cleaned: DataFrame
    observed: DataFrame
    found: FoundBoilerplate
    observation: Observation
    config: DedupeConfig
    persisted: list[DataFrame] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        """The report's ``boilerplate`` section (after the action that read ``observed``)."""
        values = dict(self.observation.get)
        examples = examples_of(values, self.found.example_keys)
        counts = {k: int(v or 0) for k, v in values.items() if not k.startswith("example_")}
        return boilerplate_section(self.config, self.found, counts, examples)

    def release(self) -> None:
        self.found.release()


def strip_boilerplate(
    df: DataFrame,
    config: DedupeConfig,
    timer: StageTimer,
    id_col: str,
    text_col: str,
    keep_emptied: bool = False,
) -> Cleaning:
    """Find the boilerplate of ``df`` (one job, timed) and return its rows cleaned, lazily:
    the cleaning pass runs in the caller's next action. ``keep_emptied``: see
    :func:`~neardup_spark.stages.boilerplate.stripped_texts`."""
    check_boilerplate_columns(df, config)
    found = find_boilerplate(df, config, timer)
    drops = df.transform(drop_lists(config, found.table)) if found.joined else None
    cleaned = df.transform(
        stripped_texts(config, id_col, text_col, found.boilerplate_set(), drops, True, keep_emptied)
    )
    observation = Observation(f"boilerplate-{uuid.uuid4().hex[:8]}")
    metrics = [*count_columns(), *example_columns(found.example_keys)]
    observed = cleaned.observe(observation, *metrics).drop(EXAMPLES)
    return Cleaning(cleaned.drop(EXAMPLES), observed, found, observation, config)


@dataclass
class DedupeCleaning:
    """The boilerplate step of a dedupe run: ``documents`` (``doc_id``, ``text``, the group)
    and ``features_of``, the per-document pass that cleans them before it fingerprints them;
    :meth:`texts_for` gives verification the cleaned texts of the candidate documents."""

    documents: DataFrame
    features_of: Callable[[DataFrame], DataFrame]
    found: FoundBoilerplate
    config: DedupeConfig
    drops: DataFrame | None

    def texts_for(self, candidates: DataFrame, broadcast: bool) -> DataFrame:
        """``doc_id``, ``text`` (cleaned) of the documents in the candidate pairs only: the
        cleaning of the others would be thrown away by verification's join."""
        ids = candidates.select(F.col(DOC_A).alias(DOC_ID)).union(
            candidates.select(F.col(DOC_B).alias(DOC_ID))
        )
        ids = F.broadcast(ids) if broadcast else ids
        wanted = self.documents.join(ids.distinct(), DOC_ID, "left_semi")
        clean = stripped_texts(
            self.config,
            DOC_ID,
            TEXT,
            self.found.boilerplate_set(),
            self.drops,
            keep_emptied=True,
        )
        return wanted.transform(clean).select(DOC_ID, TEXT)

    def report(self, features: DataFrame) -> dict[str, Any]:
        """The report's ``boilerplate`` section, its counts and examples aggregated over the
        (persisted) per-document table."""
        keys = self.found.example_keys
        row = features.agg(*count_columns(), *example_columns(keys)).first()
        values = row.asDict() if row else {}
        counts = {k: int(v or 0) for k, v in values.items() if not k.startswith("example_")}
        return boilerplate_section(self.config, self.found, counts, examples_of(values, keys))

    def release(self) -> None:
        self.found.release()


def boilerplate_step(df: DataFrame, config: DedupeConfig, timer: StageTimer) -> DedupeCleaning:
    """``dedupe --strip-boilerplate``: find the boilerplate of the input rows ``df`` (timed as
    ``boilerplate``) and give the per-document pass and verification the cleaned texts, so
    shingles, MinHash, SimHash, verification and the exact fingerprint all see them. A page
    that is all boilerplate keeps its whole text: emptied, it would be a singleton, while a
    plain dedupe clusters such pages (the same template and nothing else)."""
    check_boilerplate_columns(df, config)
    options = config.boilerplate
    keep = [config.id_col, config.text_col]
    keep += [c for c in (options.group_col, *(n for n, _ in options.prefer_order)) if c]
    found = find_boilerplate(df.select(*map(column, dict.fromkeys(keep))), config, timer)
    docs = unit_documents(df, config)
    drops = df.transform(drop_lists(config, found.table)) if found.joined else None
    features_of = cleaned_document_features(
        config, found.boilerplate_set(), drops, True, batch_faults
    )
    return DedupeCleaning(docs, features_of, found, config, drops)


def run_boilerplate(
    spark: SparkSession,
    input_path: str,
    output_path: str,
    config: DedupeConfig,
    overwrite: bool = False,
    session: SessionSettings | None = None,
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> dict[str, Any]:
    """``neardup boilerplate INPUT OUTPUT``: every input row and column to ``OUTPUT`` (Parquet
    data files at its top level) with the text cleaned and ``boilerplate_units`` /
    ``boilerplate_chars`` added; ``_report.json`` (counts, the most repeated units, seconds
    per stage) and ``_SUCCESS`` beside them. Staged, then committed, holding OUTPUT's lease
    (another run holding it is waited for up to ``lock_timeout`` seconds). Returns the report."""
    check_paths_apart({"input": input_path, "output": output_path})
    out = OutputDir(spark, output_path, BOILERPLATE_LAYOUT)
    with out.locked(lock_timeout):
        return boilerplate_locked(spark, input_path, out, config, overwrite, session)


def boilerplate_locked(
    spark: SparkSession,
    input_path: str,
    out: OutputDir,
    config: DedupeConfig,
    overwrite: bool,
    session: SessionSettings | None,
) -> dict[str, Any]:
    """:func:`run_boilerplate` holding OUTPUT's lease."""
    started = time.perf_counter()
    timer = StageTimer()
    out.prepare(overwrite)
    workers_started = start_python_workers(spark)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]
    staged = out.claim_staging(run_id)
    with timer.stage("read"):
        df, skipped_files = read_corpus(
            spark, input_path, config.skip_corrupt, (config.id_col, config.text_col)
        )
        check_columns(df, config.id_col, config.text_col)
        check_boilerplate_columns(df, config)
    expected_rows = footer_rows(df)
    df, _ = grouped_input(df)
    # Repeats mode keeps the occurrence of one document per unit: ids must name one each.
    ids_checked = (
        run_alongside(spark, lambda: check_ids(df, config.id_col))
        if config.boilerplate.mode == "repeats"
        else None
    )
    try:
        cleaning = strip_boilerplate(df, config, timer, config.id_col, config.text_col)
        keep_column_types(spark)  # the rows keep the input's timestamp types
        with timer.stage("write"):
            cleaning.observed.drop(*COUNT_HELPERS).write.parquet(staged.child(STAGED_DATA_DIR))
    finally:
        if ids_checked is not None:
            ids_checked()
    workers_started()
    section = cleaning.report()
    check_rows_read(expected_rows, section["counts"]["documents"], input_path)
    cleaning.release()
    wall = time.perf_counter() - started
    report = {
        "neardup_spark_version": __version__,
        "run_id": run_id,
        "input": input_path,
        "output": out.path,
        "config": {**config.to_dict(), **(session.to_dict() if session else {})},
        **section,
        "spark": spark_section(spark),
        "skipped_files": skipped_files,
        "stage_seconds": timer.seconds,
        "wall_seconds": round(wall, 3),
    }
    staged.write_json(BOILERPLATE_REPORT, report)
    skipped = {s["path"] for s in skipped_files}
    manifest = {
        "run_id": run_id,
        "neardup_spark_version": __version__,
        "input": input_path,
        "input_files": out.file_listing([f for f in files_read(df) if f not in skipped]),
        "config_sha256": config.settings_sha256(),
        "counts": section["counts"],
    }
    pause_if_asked("before_commit")
    out.commit(staged, manifest, on_cleared=lambda: pause_if_asked("in_commit"))
    return report
