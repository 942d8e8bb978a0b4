"""Running one row of the benchmark in its own process and reading back its timings.

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
    :data:`~neardup_spark.bench.processes.SAMPLE_INTERVAL` seconds. Summed RSS counts pages
    shared between forked workers once per process, so it is an upper bound on the physical
    memory used.

``neardup-minhash``, ``neardup-simhash`` run ``neardup dedupe CORPUS OUT --method M --master
MASTER --threshold T --overwrite``, all outputs written; ``stage_seconds`` are collected;
``neardup-strip`` is ``neardup-minhash`` with ``--strip-boilerplate``, ``neardup-boilerplate``
runs ``neardup boilerplate CORPUS OUT`` (no pairs: not scored). The
other rows run as ``neardup bench-row`` (:mod:`neardup_spark.bench.children`); spark-mllib and
datasketch are skipped above ``--mllib-max-docs`` / ``--datasketch-max-docs``. A failed or
timed-out row (``--timeout`` seconds, whole process group killed) is recorded with its error.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from neardup_spark.bench.children import STATS_FILE
from neardup_spark.bench.corpora import Corpus
from neardup_spark.bench.processes import Measured, child_env, neardup_command, run_measured
from neardup_spark.bench.scale import (
    DiskSampler,
    disk_dirs,
    prepare_dirs,
    scale_args,
    scale_metrics,
)
from neardup_spark.bench.settings import BenchSettings
from neardup_spark.bench.standalone import ClusterError
from neardup_spark.bench.variants import (
    VARIANTS,
    Variant,
    kill_after_stage,
    resumed_stages,
    variant_setup,
)
from neardup_spark.runtime.engine import local_cores

NEARDUP_ROWS = {
    "neardup-minhash": "minhash",
    "neardup-simhash": "simhash",
    "neardup-strip": "minhash",
    **dict.fromkeys(VARIANTS, "minhash"),
}
# What `neardup dedupe` prints after its summary: its SparkSession's start-up, JVM included.
SPARK_START_LINE = re.compile(r"\(\+ ([0-9.]+) s Spark start-up\)")


def row_command(row: str, corpus: Path, output: Path, settings: BenchSettings) -> list[str]:
    """The command line of one row's process (a variant row's extra options come later)."""
    if row in NEARDUP_ROWS:
        return [
            *neardup_command(),
            "dedupe",
            str(corpus),
            str(output),
            "--method",
            NEARDUP_ROWS[row],
            "--master",
            settings.master,
            "--threshold",
            str(settings.threshold),
            "--overwrite",
            *(["--strip-boilerplate"] if row == "neardup-strip" else []),
        ]
    if row == "neardup-boilerplate":
        command = [*neardup_command(), "boilerplate", str(corpus), str(output)]
        return [*command, "--master", settings.master, "--overwrite"]
    command = [*neardup_command(), "bench-row", row, str(corpus), str(output)]
    return [*command, "--master", settings.master, "--threshold", str(settings.threshold)]


def without_option(command: list[str], option: str) -> list[str]:
    """``command`` without ``option`` and its value."""
    out: list[str] = []
    skip = False
    for word in command:
        if skip:
            skip = False
        elif word == option:
            skip = True
        else:
            out.append(word)
    return out


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in kept if re.search(r"Error|Exception|error:", line)]
    return "\n".join((errors[-2:] if errors else []) + kept[-lines:])


def _remove_tree(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def skip_reason(row: str, docs: int, settings: BenchSettings) -> str | None:
    """Why ``row`` does not run at ``docs`` documents (None: it runs)."""
    limits = {
        "spark-mllib": ("--mllib-max-docs", settings.mllib_max_docs),
        "datasketch": ("--datasketch-max-docs", settings.datasketch_max_docs),
        **dict.fromkeys(VARIANTS, ("--variant-max-docs", settings.variant_max_docs)),
    }
    if row in limits and docs > limits[row][1]:
        option, limit = limits[row]
        return f"above {option} {limit:,}"
    return None


def run_row(row: str, corpus: Corpus, workdir: Path, settings: BenchSettings) -> dict[str, Any]:
    """Run one row in its own process and collect its timings (quality comes later)."""
    run_dir = workdir / "runs" / str(corpus.docs) / row
    output = run_dir / "output"
    log_path = run_dir / "log.txt"
    record: dict[str, Any] = {"docs": corpus.docs, "row": row, "status": "ok", "error": None}
    skipped = skip_reason(row, corpus.docs, settings)
    if skipped:
        record.update(status="skipped", error=skipped)
        return record
    _remove_tree(output)
    command = row_command(row, corpus.corpus, output, settings)
    measured_scale = settings.scale_metrics and row in NEARDUP_ROWS
    if measured_scale:
        prepare_dirs(run_dir)
        command += scale_args(run_dir)
    record.update(command=command, log=str(log_path), output=str(output))
    variant = VARIANTS.get(row, Variant())
    try:
        with variant_setup(variant, run_dir, settings.master) as (extra, cluster_pids):
            if variant.connect:  # the server runs the master; the client names the server
                command = without_option(command, "--master")
            command += extra
            if variant.killed_after:
                killed = kill_after_stage(command, child_env(), variant.killed_after, run_dir)
                record["killed_run"] = killed
            watched = disk_dirs(run_dir, output) if measured_scale else {}
            with DiskSampler(watched) as disk:
                measured = run_measured(
                    command, log_path, settings.timeout, child_env(), also_sample=cluster_pids
                )
    except (ClusterError, RuntimeError, OSError) as exc:
        record.update(status="failed", error=str(exc).splitlines()[0] if str(exc) else repr(exc))
        return record
    record.update(
        wall_seconds=round(measured.wall_seconds, 3),
        peak_rss_bytes=measured.peak_rss_bytes,
        rss_samples=measured.samples,
    )
    _finish_record(record, row, measured, output, log_path, settings)
    if record["status"] == "ok" and measured_scale:
        cores = 2 if variant.cluster else local_cores(settings.master)
        record["scale"] = scale_metrics(record, run_dir, corpus.corpus, disk.peak, cores)
        # Measured: the largest output (a copy of most of the input) is not read again.
        _remove_tree(output / "deduplicated")
    if record["status"] == "ok" and variant.killed_after:
        record["resumed_stages"] = resumed_stages(output)
    return record


def _finish_record(
    record: dict[str, Any],
    row: str,
    measured: Measured,
    output: Path,
    log_path: Path,
    settings: BenchSettings,
) -> None:
    """The status, timings and docs/s of a row whose process ended (in place)."""
    if measured.timed_out:
        record.update(status="timeout", error=f"timed out after {settings.timeout:g} s")
        return
    if measured.returncode != 0:
        record.update(status="failed", error=f"exit {measured.returncode}: {_tail(log_path)}")
        return
    try:
        record.update(read_timings(row, output, log_path))
    except (OSError, ValueError, KeyError) as exc:
        record.update(status="failed", error=f"no timings: {exc}")
        return
    if record["spark_start_seconds"] is not None:
        record["spark_start_seconds"] = round(record["spark_start_seconds"], 3)
    record["work_seconds"] = round(record["work_seconds"], 3)
    record["docs_per_second"] = record["docs"] / record["work_seconds"]
    record["docs_per_second_wall"] = record["docs"] / record["wall_seconds"]


def read_timings(row: str, output: Path, log_path: Path) -> dict[str, Any]:
    """What a finished row left behind: ``spark_start_seconds``, ``work_seconds`` and
    ``counts`` (plus ``stage_seconds`` for neardup rows, from ``report.json`` and the Spark
    start-up it printed; ``stats.json`` for the others)."""
    if row in NEARDUP_ROWS or row == "neardup-boilerplate":
        name = "_report.json" if row == "neardup-boilerplate" else "report.json"
        report = json.loads((output / name).read_text())
        match = SPARK_START_LINE.search(log_path.read_text(errors="replace"))
        return {
            "spark_start_seconds": float(match.group(1)) if match else None,
            "work_seconds": float(report["wall_seconds"]),
            "stage_seconds": report.get("stage_seconds", {}),
            "counts": report.get("counts", {}),
        }
    stats = json.loads((output / STATS_FILE).read_text())
    return {
        "spark_start_seconds": stats.get("spark_start_seconds"),
        "work_seconds": float(stats["work_seconds"]),
        "counts": stats.get("counts", {}),
    }
