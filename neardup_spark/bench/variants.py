"""Rows that run the ``neardup-minhash`` job another way on the same corpus. Each must give
that row's clusters and pairs (``same_as_minhash`` in ``results.json``, ``same`` in the table):

``neardup-distributed-cc``
    ``--set components_single_task_max_edges=0``: connected components in distributed
    large-star/small-star rounds whatever the number of edges.
``neardup-64-partitions``
    ``--set spark.sql.shuffle.partitions=64`` (local mode's default here: 4).
``neardup-standalone``
    on a Spark standalone cluster of two one-core workers on 127.0.0.1
    (:mod:`~neardup_spark.bench.standalone`), the driver in the row's process (client mode);
    peak memory adds the cluster's processes (daemons, executors, their Python workers).
``neardup-connect``
    from a client process over Spark Connect, against a Connect server on 127.0.0.1 started for
    the row (:mod:`~neardup_spark.bench.connect_server`) with Spark's own Python worker daemon,
    as a managed service runs it; the server's start is not counted (as a JVM's start is not),
    its processes' memory is.
``neardup-resume``
    the job is started, SIGKILLed once its candidates stage is kept (the test hook
    ``NEARDUP_PAUSE_AT=after_candidates``), then run again: the row measures that rerun, which
    resumes from the kept stages; ``resumed_stages`` and ``rerun_share`` (its work seconds over
    the ``neardup-minhash`` row's) are recorded.

``neardup-components``
    ``--cluster-rule components``: the transitive rule of 0.4 on the same pairs. Its outputs
    differ by design (no ``same_as_minhash``); the ``neardup-minhash`` row's work seconds are
    compared with its own (``time_vs``: what the anchored default costs over it).

They are skipped above ``--variant-max-docs`` (default 1,000,000).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from neardup_spark.bench.connect_server import connect_server
from neardup_spark.bench.standalone import standalone_cluster
from neardup_spark.runtime.faults import PAUSE_AT_ENV, PAUSE_MARKER_ENV

REFERENCE_ROW = "neardup-minhash"
COMPARED = ("clusters", "pairs")
# Executors of the two one-core workers, and the driver in the row's own process.
CLUSTER_WORKER_MEMORY = "4g"
CLUSTER_SETTINGS = {
    "spark.executor.cores": "1",
    "spark.executor.memory": "2g",
    "spark.executor.memoryOverhead": "1g",
    "spark.driver.memory": "2g",
    # As local mode: the same partitioning, so the rows differ only by where tasks run.
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.files.maxPartitionBytes": "8m",
}
KILL_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Variant:
    """How a variant row changes the ``neardup-minhash`` command."""

    args: tuple[str, ...] = ()
    cluster: bool = False  # on a two-worker standalone cluster
    connect: bool = False  # over Spark Connect, to a local server
    killed_after: str | None = None  # SIGKILLed after this stage once, then measured again
    same_outputs: bool = True  # must give neardup-minhash's clusters and pairs


VARIANTS = {
    "neardup-distributed-cc": Variant(args=("--set", "components_single_task_max_edges=0")),
    "neardup-64-partitions": Variant(args=("--set", "spark.sql.shuffle.partitions=64")),
    "neardup-standalone": Variant(cluster=True),
    "neardup-connect": Variant(connect=True),
    # Every stage a kept Spark stage, whatever the size (a small run finds its pairs on the
    # driver, and does not keep those stages).
    "neardup-resume": Variant(args=("--set", "driver_max_docs=0"), killed_after="candidates"),
    "neardup-components": Variant(args=("--cluster-rule", "components"), same_outputs=False),
}


@contextlib.contextmanager
def variant_setup(
    variant: Variant, run_dir: Path, master: str = "local[2]"
) -> Iterator[tuple[list[str], list[int]]]:
    """``(extra command-line options, more pids whose memory counts)`` while the row runs: a
    standalone cluster's master URL and settings, and its processes, for a cluster row; a
    Connect server's URL and process for the Connect row (``master``: the server's)."""
    if variant.connect:
        with connect_server(run_dir / "connect", master=master, plain=True) as server:
            yield [*variant.args, "--remote", server.url], [server.process.pid]
        return
    if not variant.cluster:
        yield list(variant.args), []
        return
    with standalone_cluster(
        run_dir / "cluster", workers=2, cores=1, memory=CLUSTER_WORKER_MEMORY
    ) as cluster:
        args = [*variant.args, "--master", cluster.master_url]
        for key, value in CLUSTER_SETTINGS.items():
            args += ["--set", f"{key}={value}"]
        yield args, cluster.pids()


def kill_after_stage(
    command: Sequence[str], env: dict[str, str], stage: str, run_dir: Path
) -> dict[str, Any]:
    """Run ``command`` until it has kept ``stage``, then SIGKILL its process group: what the
    killed run took and left (``seconds``, ``stages_kept``)."""
    marker = run_dir / "paused"
    marker.unlink(missing_ok=True)
    started = time.perf_counter()
    with open(run_dir / "killed-log.txt", "wb") as log:
        proc = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**env, PAUSE_AT_ENV: f"after_{stage}", PAUSE_MARKER_ENV: str(marker)},
            start_new_session=True,
        )
        deadline = time.monotonic() + KILL_TIMEOUT
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if not marker.exists():
        raise RuntimeError(f"the run never reached the end of its {stage} stage")
    return {"seconds": round(time.perf_counter() - started, 3)}


def sorted_rows(path: Path) -> list[tuple[Any, ...]]:
    """The rows of a Parquet directory as sorted tuples."""
    table = ds.dataset(str(path), format="parquet").to_table()
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def same_outputs(a: Path, b: Path) -> bool:
    """Two finished OUTPUTs hold the same clusters and pairs."""
    return all(sorted_rows(a / part) == sorted_rows(b / part) for part in COMPARED)


def compare_variants(size_rows: list[dict[str, Any]]) -> None:
    """``same_as_minhash`` of each finished variant row of one size (and ``rerun_share`` of a
    resumed one), against the ``neardup-minhash`` row of that size (in place)."""
    reference = next(
        (r for r in size_rows if r["row"] == REFERENCE_ROW and r["status"] == "ok"), None
    )
    for record in size_rows:
        if record["row"] not in VARIANTS or record["status"] != "ok" or reference is None:
            continue
        if not VARIANTS[record["row"]].same_outputs:
            continue
        record["same_as_minhash"] = same_outputs(Path(record["output"]), Path(reference["output"]))
        if record["row"] == "neardup-resume":
            record["rerun_share"] = record["work_seconds"] / reference["work_seconds"]


def resumed_stages(output: Path) -> list[str]:
    """``resumed_stages`` of a finished run's report."""
    report = json.loads((output / "report.json").read_text())
    return list(report.get("resumed_stages", []))
