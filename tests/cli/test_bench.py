"""``neardup bench``: its options, the settings they make, and small end-to-end runs (the main
table in this process, the nightly case in its own since it owns a SparkSession)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import neardup_spark.bench.main as bench_main
from neardup_spark.bench.settings import (
    DEFAULT_DATASKETCH_MAX_DOCS,
    DEFAULT_MLLIB_MAX_DOCS,
    ROWS,
    BenchSettings,
    bench_command,
)
from neardup_spark.cli import main
from neardup_spark.cli.app import build_parser
from neardup_spark.runtime.jvm_archive import ARCHIVE_ENV, archive_path

REPO = Path(__file__).resolve().parents[2]


def parse(*argv: str):
    return build_parser().parse_args(["bench", *argv])


def test_defaults():
    args = parse()
    assert args.docs == [10_000, 30_000, 100_000]
    assert args.rows == list(ROWS)
    assert args.workdir == "out/bench" and args.results is None and args.markdown is None
    assert args.threshold == 0.8 and args.master == "local[2]"
    assert args.mllib_max_docs == DEFAULT_MLLIB_MAX_DOCS == 100_000
    assert args.datasketch_max_docs == DEFAULT_DATASKETCH_MAX_DOCS == 100_000
    # The nightly case (issue 6) runs after the main table unless --no-nightly.
    assert args.nightly_sizes == [100_000, 300_000] and args.nightly_new == 10_000
    assert not args.no_nightly and not args.nightly_only


def test_the_command_line_loads_the_bench_only_to_run_it():
    """``neardup dedupe`` (a fresh process cron starts) parses its arguments without importing
    the bench's runner and its peers (~0.15 s of every process's start)."""
    code = "import sys, neardup_spark.cli.app; print(' '.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "neardup_spark.cli.bench" in loaded and "neardup_spark.bench.settings" in loaded
    runner = {"main", "children", "rensa_row", "rows", "nightly", "variants", "scale"}
    assert not loaded & {f"neardup_spark.bench.{name}" for name in runner}


def test_docs_and_rows_are_parsed_and_ordered(capsys):
    args = parse("--docs", "1000000,300", "--rows", "datasketch,floor")
    assert args.docs == [300, 1_000_000]
    assert args.rows == ["floor", "datasketch"]  # the canonical order, whatever was typed
    assert main(["bench", "--rows", "floor,nope"]) == 2
    assert "unknown row(s) nope" in capsys.readouterr().err
    assert main(["bench", "--docs", "ten"]) == 2
    assert "--docs expects integers" in capsys.readouterr().err


def test_nightly_options():
    args = parse("--nightly-sizes", "1000,3_000", "--nightly-new", "100", "--nightly-only")
    assert args.nightly_sizes == [1000, 3000] and args.nightly_new == 100 and args.nightly_only
    assert main(["bench", "--nightly-sizes", "0"]) == 2
    assert main(["bench", "--no-nightly", "--nightly-only"]) == 2


def test_every_option_reaches_the_settings_and_the_status_is_the_exit_code(monkeypatch):
    seen: list[BenchSettings] = []
    monkeypatch.setattr(bench_main, "run_bench", lambda settings, echo: seen.append(settings) or 1)
    argv = ["bench", "--docs", "300,100", "--rows", "floor", "--workdir", "W", "--seed", "4"]
    argv += ["--threshold", "0.7", "--master", "local[3]", "--results", "R", "--markdown", "M"]
    argv += ["--timeout", "60", "--mllib-max-docs", "5", "--datasketch-max-docs", "6"]
    argv += ["--nightly-sizes", "50", "--nightly-new", "7", "--nightly-repeats", "2"]
    argv += ["--nightly-series", "3", "--nightly-series-index", "40", "--docs-out", "D"]
    assert main([*argv, "--no-nightly", "--no-compile-timing"]) == 1
    assert seen == [
        BenchSettings(
            docs=[100, 300],
            rows=["floor"],
            workdir="W",
            seed=4,
            threshold=0.7,
            master="local[3]",
            results="R",
            markdown="M",
            timeout=60.0,
            mllib_max_docs=5,
            datasketch_max_docs=6,
            nightly_sizes=[50],
            nightly_new=7,
            nightly_repeats=2,
            nightly_series=3,
            nightly_series_index=40,
            no_nightly=True,
            no_compile_timing=True,
            docs_out="D",
        )
    ]
    # The command a --docs-out page names gives these settings again.
    command = bench_command(seen[0]).split()
    assert command[:2] == ["neardup", "bench"]
    assert main(command[1:]) == 1 and seen[1] == seen[0]


@pytest.mark.slow
@pytest.mark.extended
def test_tiny_bench_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NEARDUP_SPARK_JVM_ARCHIVE", "off")  # building one: test_jvm_archive.py
    workdir = tmp_path / "bench"
    argv = ["bench", "--docs", "300", "--rows", "floor,datasketch", "--workdir", str(workdir)]
    assert main([*argv, "--timeout", "240", "--no-nightly", "--no-compile-timing"]) == 0
    results = json.loads((workdir / "results.json").read_text())
    rows = {r["row"]: r for r in results["rows"]}
    assert set(rows) == {"floor", "datasketch"}
    floor, sketch = rows["floor"], rows["datasketch"]
    assert floor["status"] == "ok" and sketch["status"] == "ok"
    assert floor["counts"]["docs"] == 300 and floor["counts"]["shingles"] > 0
    assert floor["spark_start_seconds"] > 0 and sketch["spark_start_seconds"] is None
    # Each process's wall time holds what it timed inside (its Spark start-up and its work).
    assert floor["spark_start_seconds"] + floor["work_seconds"] <= floor["wall_seconds"]
    assert sketch["work_seconds"] <= sketch["wall_seconds"]
    assert 0.9 <= sketch["recall"] <= 1.0 and 0.5 <= sketch["precision"] <= 1.0
    assert sketch["vs_floor"] == pytest.approx(sketch["docs_per_second"] / floor["docs_per_second"])
    markdown = (workdir / "results.md").read_text()
    out = capsys.readouterr().out
    assert "| datasketch" in markdown and markdown in out
    assert "[bench] 300 floor: ok, wall " in out and f"[bench] wrote {workdir}" in out
    assert "JVM class archive off" in markdown and results["settings"]["jvm_archive"] is None
    assert results["settings"]["kernels"] is None  # --no-compile-timing


@pytest.mark.slow
@pytest.mark.extended
def test_nightly_case_end_to_end(tmp_path):
    """Index 200 documents (and a plain run over them), then 50 new ones against it (twice:
    the index restored between repeats) and a full rerun over all 250; then a series of 2
    nights of 50 on an index of 100. The counts come from the runs' reports."""
    # The JVM class archive if one is built (make setup's, or the suite's once done); else off,
    # not built by the bench (that is test_jvm_archive.py's).
    archive = archive_path()
    choice = str(archive) if archive is not None and archive.is_file() else "off"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, ARCHIVE_ENV: choice}
    command = [sys.executable, "-m", "neardup_spark", "bench", "--nightly-only"]
    command += ["--nightly-sizes", "200", "--nightly-new", "50", "--nightly-repeats", "2"]
    command += ["--nightly-series", "2", "--nightly-series-index", "100"]
    command += ["--workdir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "[nightly] 200: index built in " in done.stdout
    assert done.stdout.count("[nightly] 200: 50 new documents in ") == 2
    results = json.loads((tmp_path / "nightly.json").read_text())
    (row,) = results["rows"]
    assert row["index_docs"] == 200 and row["new_docs"] == 50 and row["repeats"] == 2
    assert len(row["all_nightly_seconds"]) == len(row["all_full_seconds"]) == 2
    assert row["nightly_seconds"] == min(row["all_nightly_seconds"])
    assert row["nightly_counts"]["input_rows"] == 50 and row["nightly_growth"] == 1.0
    assert row["index_bytes"] > 0 and row["input_bytes"] > 0
    # The full rerun's pairs between a new and an indexed document: all clustered by the night.
    assert row["cross_day_recall"] == 1.0
    assert row["build_ratio"] == pytest.approx(
        row["build_work_seconds"] / row["plain_work_seconds"], abs=0.01
    )
    # The night and the full rerun again as fresh CLI processes (what cron starts).
    cli = row["cli"]
    assert "error" not in cli["night"] and "error" not in cli["full"], cli
    assert cli["night"]["work_seconds"] > 0 and cli["full"]["start_seconds"] > 0
    assert cli["work_ratio"] == pytest.approx(
        cli["full"]["work_seconds"] / cli["night"]["work_seconds"], rel=0.01
    )
    series = results["series"]
    assert [n["index_docs"] for n in series["nights"]] == [150, 200]
    assert [n["segments"] for n in series["nights"]] == [2, 3]  # one segment a night
    assert series["first_seconds"] == series["nights"][0]["work_seconds"]
    assert (tmp_path / "nightly.md").read_text() in done.stdout
