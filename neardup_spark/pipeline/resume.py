"""Resumable runs: each finished stage's result kept with a completion marker, so a rerun after
a crash or a kill starts where the last run stopped.

A run of ``neardup dedupe INPUT OUTPUT`` stages under ``OUTPUT/_staging/RUN_ID/``, where the run
id is made of the input's digest (each data file's path, size and SHA-256, or its file
system's checksum: :func:`~neardup_spark.io.corpus.input_files`) and the hash of the settings
that decide the result (:meth:`~neardup_spark.config.DedupeConfig.settings_json`, plus the
package version). Each stage writes its result there as Parquet, then its marker:

```
OUTPUT/_staging/RUN_ID/run.json                 input files, digest, config hash (why a later
                                                run with other input or config starts afresh)
OUTPUT/_staging/RUN_ID/stages/sketch/           the per-document table        + sketch.json
OUTPUT/_staging/RUN_ID/stages/exact/            exact-copy edges              + exact.json
OUTPUT/_staging/RUN_ID/stages/candidates/       candidate pairs               + candidates.json
OUTPUT/_staging/RUN_ID/stages/verify/           verified near-duplicate pairs + verify.json
OUTPUT/_staging/RUN_ID/stages/components/       each clustered document's representative
                                                (pairs/ is staged before it)  + components.json
```

A marker (``stages/STAGE.json``: the stage's counts) is written only once its result is
complete, so a stage with a marker is read back and one without is computed again. Same input,
same config: same run id, and the finished stages are resumed (listed in ``report.json`` as
``resumed_stages``). Other input or config: another run id; the unfinished run is removed and
the run starts afresh, saying why. ``--no-resume`` removes it too. Nothing outside
``_staging`` is touched before the commit, so the SIGKILL guarantees of
:mod:`neardup_spark.io.output` hold. A fresh run and a resumed one read every stage's result
back from its Parquet files the same way, so they give the same outputs.

The Python API (:func:`~neardup_spark.pipeline.dedupe.dedupe` without ``results``) keeps its
intermediates in Spark's cache instead (:class:`StageResults`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession

from neardup_spark import __version__
from neardup_spark.config import DedupeConfig
from neardup_spark.io.corpus import CorpusSource
from neardup_spark.io.filesystem import basename, join, write_parquet_file
from neardup_spark.io.output import STAGING_DIR, OutputDir
from neardup_spark.runtime.engine import from_arrow_batches
from neardup_spark.runtime.faults import pause_if_asked

log = logging.getLogger(__name__)

# The stages whose results are kept, in the order a run finishes them.
STAGES = ("sketch", "exact", "candidates", "verify", "components")
STAGES_DIR = "stages"
RUN_FILE = "run.json"
KEPT_FILES = "files"  # a marker's record of its stage's data files and their sizes
DIGEST_CHARS = 16  # of each of the two hashes in a run id


class StageResults:
    """Where a run keeps each stage's result: here, in Spark's cache (the Python API). Nothing
    is finished beforehand, and nothing outlives the session."""

    def __init__(self) -> None:
        self.resumed: list[str] = []
        self._cached: dict[str, DataFrame] = {}

    def finished(self, stage: str) -> dict[str, Any] | None:
        """The marker of ``stage`` when an earlier run finished it (then :meth:`load` reads its
        result), else None."""
        return None

    def load(self, stage: str) -> DataFrame:
        raise KeyError(f"stage {stage} was not finished by an earlier run")

    def keep(
        self, stage: str, df: DataFrame, metrics: dict[str, Column], level: StorageLevel
    ) -> tuple[DataFrame, dict[str, int]]:
        """Materialise ``df`` as ``stage``'s result (here persisted at ``level``): the
        DataFrame later steps read, and ``metrics`` (aggregate columns) over its rows."""
        kept = self._cached[stage] = df.persist(level)
        row = kept.agg(*[column.alias(name) for name, column in metrics.items()]).first()
        return kept, _as_counts(row.asDict() if row is not None else {})

    def keep_table(self, stage: str, spark: SparkSession, table: pa.Table, parts: int) -> DataFrame:
        """``stage``'s result computed in this process (an Arrow table) as the DataFrame later
        steps read, in ``parts`` partitions (here its Arrow batches, sent to the JVM once)."""
        return from_arrow_batches(spark, table).coalesce(max(1, parts))

    def release(self, *stages: str) -> None:
        """Free what :meth:`keep` cached for ``stages`` (their readers are done)."""
        for stage in stages:
            cached = self._cached.pop(stage, None)
            if cached is not None:
                cached.unpersist()

    def finish(self, stage: str, marker: dict[str, Any]) -> None:
        """Record ``stage`` as finished, with ``marker`` (its counts; ``staged``: outputs
        written with it, which must still be staged for it to count as finished), once
        everything it stands for is written."""


def _as_counts(values: dict[str, Any]) -> dict[str, int]:
    return {name: int(value or 0) for name, value in values.items()}


class StagedResults(StageResults):
    """Stage results as Parquet under ``staged/stages/``, each with a completion marker."""

    def __init__(self, spark: SparkSession, staged: OutputDir) -> None:
        super().__init__()
        self._spark = spark
        self._staged = staged
        self._decided: dict[str, dict[str, Any] | None] = {}

    def _result(self, stage: str) -> str:
        return f"{STAGES_DIR}/{stage}"

    def _marker(self, stage: str) -> str:
        return f"{STAGES_DIR}/{stage}.json"

    def finished(self, stage: str) -> dict[str, Any] | None:
        """As :meth:`StageResults.finished`; decided once per run (a stage redone rewrites
        what its marker looks for)."""
        if stage not in self._decided:
            self._decided[stage] = self._finished(stage)
        return self._decided[stage]

    def _finished(self, stage: str) -> dict[str, Any] | None:
        if not self._staged.exists(self._marker(stage)):
            return None
        marker = readable_json(self._staged, self._marker(stage))
        if marker is None:
            log.warning("stage %s: done again, its marker is cut off or not JSON", stage)
            return None
        recorded = marker.get(KEPT_FILES) or {}
        changed = [
            f"{where}/{name}"
            for where, files in sorted(recorded.items())
            for name in _changed_files(files, self._data_files(where))
        ]
        if changed:
            log.warning(
                "stage %s: done again, %d of its kept files are missing or resized (%s)",
                stage,
                len(changed),
                ", ".join(changed[:3]),
            )
            return None
        # Outputs staged with the stage (pairs/ with components) may have been moved into
        # OUTPUT by a commit that was killed half way: then the stage is done again.
        missing = [name for name in marker.get("staged", []) if not self._staged.exists(name)]
        if missing:
            log.info("stage %s: done again, its %s was moved out", stage, ", ".join(missing))
            return None
        if stage not in self.resumed:
            self.resumed.append(stage)
            log.info("stage %s: finished by an earlier run of this input and config", stage)
        return marker

    def load(self, stage: str) -> DataFrame:
        return self._spark.read.parquet(self._staged.child(self._result(stage)))

    def keep(
        self, stage: str, df: DataFrame, metrics: dict[str, Column], level: StorageLevel
    ) -> tuple[DataFrame, dict[str, int]]:
        """Write ``df`` as Parquet (replacing what a killed attempt left), counting ``metrics``
        on the way (one job), and read it back."""
        observed = Observation(f"neardup-{stage}")
        columns = [column.alias(name) for name, column in metrics.items()]
        path = self._staged.child(self._result(stage))
        df.observe(observed, *columns).write.mode("overwrite").parquet(path)
        return self.load(stage), _as_counts(observed.get)

    def keep_table(self, stage: str, spark: SparkSession, table: pa.Table, parts: int) -> DataFrame:
        """Write the table as ``parts`` Parquet files (replacing what a killed attempt left),
        from this process, and read it back."""
        result = self._result(stage)
        self._staged.delete(result)
        step = -(-table.num_rows // max(1, parts))
        for number, start in enumerate(range(0, max(table.num_rows, 1), step or 1)):
            name = f"part-{number:05d}.parquet"
            path = join(self._staged.child(result), name)
            write_parquet_file(path, table.slice(start, step), self._staged.storage)
        return self.load(stage)

    def finish(self, stage: str, marker: dict[str, Any]) -> None:
        # The data files of the stage's result and of the outputs staged with it, and their
        # sizes: what a rerun checks before it reads them back (a file deleted or cut off by a
        # clean-up or a copy, or a commit killed half way through moving pairs/ on an object
        # store, would otherwise lose rows without a word).
        kept = [self._result(stage), *marker.get("staged", [])]
        files = {where: self._data_files(where) for where in kept}
        self._staged.write_json(self._marker(stage), {"stage": stage, **marker, KEPT_FILES: files})
        pause_if_asked(f"after_{stage}")

    def _data_files(self, where: str) -> dict[str, int]:
        """The data files under ``where`` (relative to the run's staging) and their sizes."""
        found = self._staged.storage.walk_files(self._staged.child(where))
        names = ((basename(f.path), f.size) for f in found if not f.is_dir)
        return {name: size for name, size in names if not name.startswith(("_", "."))}


def _changed_files(recorded: dict[str, int], now: dict[str, int]) -> list[str]:
    """The recorded files missing or of another size now."""
    return sorted(name for name, size in recorded.items() if now.get(name) != size)


def readable_json(staged: OutputDir, name: str) -> dict[str, Any] | None:
    """A marker's or ``run.json``'s object; None when the file is cut off or not JSON (they
    are not written atomically: a full disk or a dying client can leave a part)."""
    try:
        return staged.read_json(name)
    except (ValueError, TypeError):
        return None


@dataclass
class RunStaging:
    """What a run of ``run()`` starts from: its id, its staging directory, where its stage
    results go, and why earlier unfinished runs were set aside."""

    run_id: str
    staged: OutputDir
    results: StagedResults
    input_files: list[dict[str, Any]]
    started_afresh: list[str] = field(default_factory=list)

    def report_section(self) -> dict[str, Any]:
        """``report.json``'s ``resume``: the stages read back, and why a run started afresh."""
        return {
            "run_id": self.run_id,
            "resumed_stages": list(self.results.resumed),
            "started_afresh": list(self.started_afresh),
        }


def config_sha256(config: DedupeConfig) -> str:
    """Hash of what decides a run's results: the settings and the code's version."""
    return hashlib.sha256(f"{__version__}\n{config.settings_json()}".encode()).hexdigest()


def input_sha256(files: list[dict[str, Any]]) -> str:
    """Hash of the input's data files (paths, sizes, digests), as listed by ``input_files``."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def run_staging(
    spark: SparkSession,
    out: OutputDir,
    source: CorpusSource,
    config: DedupeConfig,
    resume: bool,
    files: list[dict[str, Any]],
) -> RunStaging:
    """The run id of ``source`` under ``config``, and its staging directory: kept when an
    earlier run of the same id left it (and ``resume``), else new. Staging directories of
    other runs are removed, with the reason logged and returned for the report. A catalog
    table (``--input-table``) has no files to digest: its runs always start afresh. ``files``:
    :func:`~neardup_spark.io.corpus.input_files` of the input (listed once by the run)."""
    input_digest, config_digest = input_sha256(files), config_sha256(config)
    if source.path is None:
        input_digest = uuid.uuid4().hex  # nothing tells a rerun it reads the same rows
    run_id = f"{input_digest[:DIGEST_CHARS]}-{config_digest[:DIGEST_CHARS]}"
    staging = OutputDir(spark, out.child(STAGING_DIR), out.layout)
    reasons = []
    for entry in sorted(staging.entries()):
        earlier = out.staging(entry)
        run_file = readable_json(earlier, RUN_FILE)
        if entry == run_id and resume and run_file is not None:
            continue
        if run_file is None:
            why = f"the unfinished run {entry} is not resumed: its {RUN_FILE} is cut off"
            reasons.append(why)
        else:
            reasons.append(_why_afresh(entry, run_id, run_file, files, config_digest))
        log.warning("starting afresh: %s", reasons[-1])
        out.drop_staging(entry)
    staged = out.claim_staging(run_id)
    if not staged.exists(RUN_FILE):
        staged.write_json(
            RUN_FILE,
            {
                "run_id": run_id,
                "input": source.shown,
                "input_files": files,
                "input_sha256": input_digest,
                "config_sha256": config_digest,
            },
        )
    return RunStaging(run_id, staged, StagedResults(spark, staged), files, reasons)


def _why_afresh(
    entry: str,
    run_id: str,
    earlier: dict[str, Any],
    files: list[dict[str, Any]],
    config_digest: str,
) -> str:
    """Why the unfinished run ``entry`` is not resumed by run ``run_id``."""
    if entry == run_id:
        return f"--no-resume: the unfinished run {entry} of this input and config is discarded"
    changed = []
    if earlier.get("input_files") is not None and earlier["input_files"] != files:
        before = {f["path"]: f for f in earlier["input_files"]}
        now = {f["path"]: f for f in files}
        differ = sorted(p for p in before.keys() | now.keys() if before.get(p) != now.get(p))
        changed.append(f"the input changed ({len(differ)} file(s) added, removed or modified)")
    if earlier.get("config_sha256") is not None and earlier["config_sha256"] != config_digest:
        changed.append("the config changed")
    what = " and ".join(changed) or "it was of another input or config"
    return f"the unfinished run {entry} is not resumed: {what}"
