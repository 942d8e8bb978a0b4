"""What a large run costs besides time (``neardup bench --scale-metrics``, ``make bench-scale``).

For each neardup row it measures:

*disk*
    the input (the corpus's Parquet files); the peak, sampled every
    :data:`DISK_SAMPLE_INTERVAL` seconds, of the run's staging directory (``OUTPUT/_staging``:
    the kept stage results, checkpoints and staged outputs) and of Spark's local directory
    (``spark.local.dir``, set to the row's own directory: shuffle and spill files); the
    committed outputs (``clusters/``, ``pairs/``, ``deduplicated/``; the last is removed once
    measured: ten million documents leave ~13 GB of it per row).
*shuffle and spill*
    summed over every task from Spark's event log (``spark.eventLog.*``, written to the row's
    directory): shuffle bytes written and read, bytes spilled to disk and from memory, input
    bytes read, executor run and CPU time.
*sizing*
    documents per executor-core-hour (documents / (work seconds x cores / 3600)), peak memory
    per core, shuffle bytes written per document: the figures of the README's sizing table.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DISK_SAMPLE_INTERVAL = 2.0
OUTPUT_PARTS = ("clusters", "pairs", "deduplicated")


def scale_args(run_dir: Path) -> list[str]:
    """``neardup dedupe`` options that put Spark's local files and event log in ``run_dir``."""
    return [
        "--set",
        f"spark.local.dir={run_dir / 'spark-local'}",
        "--set",
        "spark.eventLog.enabled=true",
        "--set",
        f"spark.eventLog.dir={(run_dir / 'events').resolve().as_uri()}",
        "--set",
        "spark.eventLog.compress=false",
    ]


def prepare_dirs(run_dir: Path) -> None:
    """The row's Spark local and event-log directories, empty."""
    for name in ("spark-local", "events"):
        shutil.rmtree(run_dir / name, ignore_errors=True)
        (run_dir / name).mkdir(parents=True)


def dir_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (0 when it does not exist); files that vanish while
    it is walked are skipped."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


class DiskSampler:
    """Peak bytes of each of ``dirs`` (name -> path), sampled in a thread."""

    def __init__(self, dirs: dict[str, Path], interval: float = DISK_SAMPLE_INTERVAL) -> None:
        self.dirs = dirs
        self.interval = interval
        self.peak = dict.fromkeys(dirs, 0)
        self._lock = threading.Lock()  # sample() runs in the thread and on exit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="disk-sampler", daemon=True)

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        for name, path in self.dirs.items():
            size = dir_bytes(path)
            with self._lock:
                self.peak[name] = max(self.peak[name], size)

    def __enter__(self) -> DiskSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def _task_ends(events_dir: Path) -> Iterator[dict[str, Any]]:
    for path in sorted(events_dir.rglob("*")) if events_dir.exists() else []:
        if not path.is_file():
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if '"SparkListenerTaskEnd"' not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:  # a line cut short by the end of the run
                    continue
                metrics = event.get("Task Metrics")
                if isinstance(metrics, dict):
                    yield metrics


def task_totals(events_dir: Path) -> dict[str, int]:
    """Shuffle, spill, input and executor time summed over the tasks of the event log(s) in
    ``events_dir``."""
    totals = dict.fromkeys(
        (
            "tasks",
            "shuffle_write_bytes",
            "shuffle_read_bytes",
            "disk_spill_bytes",
            "memory_spill_bytes",
            "input_read_bytes",
            "executor_run_ms",
            "executor_cpu_ns",
        ),
        0,
    )
    for m in _task_ends(events_dir):
        write = m.get("Shuffle Write Metrics", {})
        read = m.get("Shuffle Read Metrics", {})
        totals["tasks"] += 1
        totals["shuffle_write_bytes"] += int(write.get("Shuffle Bytes Written", 0))
        totals["shuffle_read_bytes"] += int(read.get("Remote Bytes Read", 0)) + int(
            read.get("Local Bytes Read", 0)
        )
        totals["disk_spill_bytes"] += int(m.get("Disk Bytes Spilled", 0))
        totals["memory_spill_bytes"] += int(m.get("Memory Bytes Spilled", 0))
        totals["input_read_bytes"] += int(m.get("Input Metrics", {}).get("Bytes Read", 0))
        totals["executor_run_ms"] += int(m.get("Executor Run Time", 0))
        totals["executor_cpu_ns"] += int(m.get("Executor CPU Time", 0))
    return totals


def sizing(
    docs: int, work_seconds: float, cores: int, peak_rss: int, shuffle_bytes: int
) -> dict[str, float]:
    """The README's sizing figures for one run on ``cores`` executor cores."""
    core_hours = work_seconds * cores / 3600
    return {
        "docs_per_core_hour": docs / core_hours if core_hours else 0.0,
        "peak_bytes_per_core": peak_rss / cores if cores else 0.0,
        "shuffle_bytes_per_doc": shuffle_bytes / docs if docs else 0.0,
    }


def scale_metrics(
    record: dict[str, Any], run_dir: Path, input_dir: Path, peaks: dict[str, int], cores: int
) -> dict[str, Any]:
    """A finished row's disk, shuffle and sizing figures (``record`` holds its docs, work
    seconds, peak RSS and output path)."""
    output = Path(record["output"])
    totals = task_totals(run_dir / "events")
    return {
        "input_bytes": dir_bytes(input_dir),
        "output_bytes": sum(dir_bytes(output / part) for part in OUTPUT_PARTS),
        "staging_peak_bytes": peaks.get("staging", 0),
        "spark_local_peak_bytes": peaks.get("spark_local", 0),
        **totals,
        **sizing(
            record["docs"],
            float(record["work_seconds"]),
            cores,
            int(record.get("peak_rss_bytes") or 0),
            totals["shuffle_write_bytes"],
        ),
        "cores": cores,
    }


def disk_dirs(run_dir: Path, output: Path) -> dict[str, Path]:
    """The directories a row's :class:`DiskSampler` watches."""
    return {"staging": output / "_staging", "spark_local": run_dir / "spark-local"}
