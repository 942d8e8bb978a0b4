"""The nightly case's CLI measurements: how they read on the nightly page."""

from __future__ import annotations

from neardup_spark.bench.cli_nights import format_cli_nights


def test_cli_nights_lines():
    night = {"work_seconds": 6.0, "process_seconds": 14.0, "start_seconds": 8.0}
    full = {"work_seconds": 48.0, "process_seconds": 56.0, "start_seconds": 8.0}
    row = {
        "index_docs": 200_000,
        "new_docs": 10_000,
        "cli": {
            "night": {**night, "spark_start_seconds": 3.5, "all_process_seconds": [15.2, 14.0]},
            "full": {**full, "spark_start_seconds": 3.4},
            "work_ratio": 8.0,
            "process_ratio": 4.0,
        },
    }
    failed = {"index_docs": 1, "new_docs": 1, "cli": {"night": {"error": "exit 1"}, "full": full}}
    lines = format_cli_nights([row, failed, {"index_docs": 2, "new_docs": 2}]).splitlines()
    assert lines == [
        "- 200,000 indexed, 10,000 new: night work 6.0 s, process 14.0 s (the faster of 15.2 "
        "and 14.0 s; before its work: 8.0 s, Spark start-up 3.5 s of it); full rerun work "
        "48.0 s, process 56.0 s; the night is 1/8.0 of the rerun's work, 1/4.0 of its process",
        "- 1 indexed, 1 new: a CLI run failed: exit 1",
    ]
