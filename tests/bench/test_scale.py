"""Disk, shuffle and sizing figures of a row (--scale-metrics)."""

from __future__ import annotations

import json

import pytest

from neardup_spark.bench.scale import (
    DiskSampler,
    dir_bytes,
    scale_args,
    scale_metrics,
    sizing,
    task_totals,
)
from neardup_spark.bench.tables import scale_table


def task_end(written: int, local: int, remote: int, spilled: int, run_ms: int) -> str:
    return json.dumps(
        {
            "Event": "SparkListenerTaskEnd",
            "Task Metrics": {
                "Executor Run Time": run_ms,
                "Executor CPU Time": run_ms * 1_000_000,
                "Disk Bytes Spilled": spilled,
                "Memory Bytes Spilled": 2 * spilled,
                "Input Metrics": {"Bytes Read": 10},
                "Shuffle Write Metrics": {"Shuffle Bytes Written": written},
                "Shuffle Read Metrics": {"Local Bytes Read": local, "Remote Bytes Read": remote},
            },
        }
    )


def test_task_totals_sum_the_event_log(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    lines = [
        json.dumps({"Event": "SparkListenerApplicationStart"}),
        task_end(100, 30, 5, 0, 7),
        task_end(50, 0, 0, 40, 3),
        '{"Event": "SparkListenerTaskEnd", "Task Metr',  # cut short by a killed run
    ]
    (events / "app-1.inprogress").write_text("\n".join(lines) + "\n")
    assert task_totals(events) == {
        "tasks": 2,
        "shuffle_write_bytes": 150,
        "shuffle_read_bytes": 35,
        "disk_spill_bytes": 40,
        "memory_spill_bytes": 80,
        "input_read_bytes": 20,
        "executor_run_ms": 10,
        "executor_cpu_ns": 10_000_000,
    }
    assert task_totals(tmp_path / "missing")["tasks"] == 0


def test_disk_sampler_keeps_each_directorys_peak(tmp_path):
    watched = tmp_path / "staging"
    watched.mkdir()
    (watched / "a").write_bytes(b"x" * 300)
    with DiskSampler({"staging": watched, "gone": tmp_path / "none"}, interval=60) as disk:
        (watched / "b").write_bytes(b"x" * 700)
        disk.sample()
        (watched / "a").unlink()
        (watched / "b").unlink()
    assert disk.peak == {"staging": 1000, "gone": 0}
    assert dir_bytes(watched) == 0


def test_sizing_figures():
    figures = sizing(
        docs=1_000_000, work_seconds=120.0, cores=2, peak_rss=4 * 2**30, shuffle_bytes=3_000_000_000
    )
    assert figures == {
        "docs_per_core_hour": pytest.approx(15_000_000),
        "peak_bytes_per_core": 2 * 2**30,
        "shuffle_bytes_per_doc": 3000.0,
    }


def test_scale_args_put_spark_files_in_the_row_directory(tmp_path):
    args = scale_args(tmp_path)
    assert args[1] == f"spark.local.dir={tmp_path / 'spark-local'}"
    assert f"spark.eventLog.dir={(tmp_path / 'events').as_uri()}" in args


def test_scale_metrics_and_table(tmp_path):
    run_dir, corpus = tmp_path / "run", tmp_path / "corpus"
    (run_dir / "events").mkdir(parents=True)
    (run_dir / "events" / "app").write_text(task_end(4000, 0, 0, 0, 1) + "\n")
    corpus.mkdir()
    (corpus / "part-0.parquet").write_bytes(b"x" * 5000)
    for part in ("clusters", "pairs", "deduplicated"):
        (run_dir / "output" / part).mkdir(parents=True)
        (run_dir / "output" / part / "f").write_bytes(b"x" * 100)
    record = {
        "docs": 2,
        "work_seconds": 3.6,
        "peak_rss_bytes": 2**30,
        "output": str(run_dir / "output"),
    }
    metrics = scale_metrics(record, run_dir, corpus, {"staging": 7, "spark_local": 9}, cores=2)
    assert metrics["input_bytes"] == 5000 and metrics["output_bytes"] == 300
    assert metrics["staging_peak_bytes"] == 7 and metrics["spark_local_peak_bytes"] == 9
    assert metrics["shuffle_bytes_per_doc"] == 2000 and metrics["docs_per_core_hour"] == 1000
    rows = [
        {**record, "row": "neardup-minhash", "scale": metrics},
        {
            "docs": 2,
            "row": "neardup-resume",
            "work_seconds": 1.8,
            "same_as_minhash": True,
            "resumed_stages": ["sketch", "exact", "candidates"],
            "rerun_share": 0.5,
        },
    ]
    lines = scale_table(rows).splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert cells[0][:3] == ["docs", "row", "work s"] and len(cells) == 4
    first = dict(zip(cells[0], cells[2], strict=True))
    assert first["row"] == "neardup-minhash" and first["work s"] == "3.6"
    assert first["shuffle B/doc"] == "2,000" and first["docs/core-hour"] == "1,000"
    assert first["peak GB/core"] == "0.50" and first["same"] == "-"
    second = dict(zip(cells[0], cells[3], strict=True))
    assert second["same"] == "True"
    assert second["resumed"] == "sketch, exact, candidates (50% of fresh)"
    assert scale_table([{"docs": 2, "row": "floor"}]) == ""
