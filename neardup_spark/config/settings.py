"""Where and how a run executes, apart from what it computes: :class:`SessionSettings` (the
Spark session) and :class:`ExecutionSettings` (the thresholds that choose each step's executor,
read by :mod:`neardup_spark.pipeline.plan`). Neither is part of a run id, a manifest's config
hash or an index's settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from neardup_spark.config.dedupe import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.redaction import redact_remote, redact_settings

# Seconds a run waits for another that holds its index or OUTPUT (an overlapping nightly run
# waits for the one before it, then commits on top of it).
DEFAULT_LOCK_TIMEOUT = 3600.0


@dataclass(frozen=True)
class SessionSettings:
    """Where and how the job runs; none of it changes what a run computes."""

    # Spark master; None: spark-submit's, or local[*].
    master: str | None = None
    # Spark Connect server (sc://HOST:PORT); None: spark.remote of `spark:`, else SPARK_REMOTE.
    remote: str | None = None
    # Extra Spark settings, e.g. {"spark.driver.memory": "4g"}.
    spark: dict[str, str] = field(default_factory=dict)
    # Documents per Arrow batch in the Python stages (spark.sql.execution.arrow.maxRecordsPerBatch).
    arrow_batch_size: int = 2000
    # Seconds to wait for another run holding the index or OUTPUT (its lock); 0: do not wait.
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.arrow_batch_size, int) or self.arrow_batch_size < 1:
            raise UserError(
                f"arrow_batch_size must be a positive integer, got {self.arrow_batch_size!r}"
            )
        timeout = self.lock_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise UserError(f"lock_timeout must be a number of seconds >= 0, got {timeout!r}")

    def to_dict(self) -> dict[str, Any]:
        """The settings as a report, manifest or log records them: secret Spark settings'
        values redacted (:func:`~neardup_spark.redaction.redact_settings`)."""
        data = dataclasses.asdict(self)
        data["spark"] = redact_settings(data["spark"])
        data["remote"] = redact_remote(data["remote"])
        return data


@dataclass(frozen=True)
class ExecutionSettings:
    """Where each step of a run executes: the thresholds :mod:`neardup_spark.pipeline.plan`
    compares the input's facts and a run's counts with. Every plan computes the same outputs,
    so none of this changes what a run computes: switching a setting keeps a run's id (a run
    that died of driver memory resumes with ``--set driver_max_docs=0``), a manifest's config
    hash and an index's settings."""

    # Verified graphs up to this many edges get their components in one executor task (SciPy);
    # larger ones in distributed large-star/small-star rounds. None: as many as one Python
    # task's memory holds (pipeline/execution.py, single_task_edge_limit).
    components_single_task_max_edges: int | None = None
    # The anchored rule's distributed path (graphs above that) decides documents in rounds of
    # Spark jobs until the edges still open fit one task, at most this many, then finishes in
    # one task (pipeline/anchored_rounds.py): a chain of revisions takes about a round a link.
    anchored_max_rounds: int = 12
    # Nightly runs (--index) of up to this many new documents do their own work (contents,
    # candidates, verification, stable ids, the new segment) on the driver, after the full run's
    # per-document pass; larger batches run every step as Spark jobs. The answer is the same.
    nightly_driver_max_docs: int = 100_000
    # Such a night reads the rows it needs of the index's narrow docs and pairs tables in the
    # driver (filtered PyArrow scans) when a table has up to this many rows and the driver can
    # read the index's files; else in Spark jobs. The answer is the same. 0: always Spark.
    nightly_driver_scan_max_rows: int = 20_000_000
    # In local mode, a run (and a night on the driver) whose input is local Parquet files with
    # id and text columns of at most this many bytes uncompressed reads them with PyArrow and
    # does its per-document pass in the driver's threads, not as Spark tasks (a night keeps
    # the texts in the driver's memory until it ends, for its verification); a night also
    # scans the index's keys in the driver's threads. The answer is the same. 0: always Spark
    # tasks (pipeline/sketch.py, chosen by pipeline/plan.py).
    driver_read_max_bytes: int = 512 * 2**20
    # Runs of up to this many documents find their exact copies, candidates, verified pairs
    # and (with the default representatives) clusters on the driver after the per-document
    # pass, not as Spark stages (pipeline/driver_pairs.py): the same pairs, without each
    # stage's fixed cost. 0: always as Spark stages.
    driver_max_docs: int = 200_000
    # Id sets (the candidates' sides, the removed documents) up to this many rows are broadcast
    # to the input scan; larger ones are joined by the documents' addresses (bitmap words) when
    # the input is a Parquet scan (pipeline/addressed_input.py).
    broadcast_max_rows: int = 2_000_000
    # Steps' choices given beforehand, STEP: WHERE (--set plan.sketch=tasks): each is checked
    # against what the run's facts allow (pipeline/plan.py lists the steps and choices).
    plan: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.plan, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.plan.items()
        ):
            raise UserError(
                f"plan must map steps to choices (plan.sketch=tasks), got {self.plan!r}"
            )
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "plan" or (value is None and f.name == "components_single_task_max_edges"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UserError(f"{f.name} must be an integer >= 0, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class JobSettings:
    """One command's settings: what it computes, its session, where its steps execute."""

    dedupe: DedupeConfig
    session: SessionSettings
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)

    def to_dict(self) -> dict[str, Any]:
        """The ``config`` section of a run report: every setting."""
        return {**self.dedupe.to_dict(), **self.execution.to_dict(), **self.session.to_dict()}
