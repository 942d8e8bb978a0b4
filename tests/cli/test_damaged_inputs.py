"""An input file whose footer reads but whose data pages do not (bytes zeroed in a column chunk)
ends every command that reads it in exit 2 with one line naming the file, its format and what
failed, whichever reader meets the damage: this process's threads (PyArrow), Spark tasks that
read row groups with PyArrow, Spark's own Parquet and ORC readers, the copy of
``deduplicated/`` (PyArrow here or in tasks); nightly runs too. ``--skip-corrupt`` cannot skip
a file whose damage is found mid-run, and says so. The input is left as it was and nothing is
committed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.cli.test_whole_files import assert_plain, error_line, here
from tests.damaged_files import damaged_orc, damaged_parquet, digests, pages
from tests.plans import planned

REPO = Path(__file__).resolve().parents[2]
LOCAL = ("--master", "local[2]", "--set", "spark.sql.shuffle.partitions=2")
SKIP_NOTE = "--skip-corrupt skips files whose damage is found before the run"
PYARROW_SAYS = "reading row group 2 of 3 (rows 200 to 399) failed (OSError: Corrupt snappy"


def corpus(root: Path, column: str = "text") -> Path:
    """A whole file (ids 0-599) and one damaged in ``column``'s second row group (ids from
    1000)."""
    root.mkdir()
    pq.write_table(pages(0, 600), root / "a.parquet", row_group_size=200)
    damaged_parquet(root / "b.parquet", 1000, column)
    return root


def assert_refused(code: int, err: str, out: Path, said: str, fmt: str = "Parquet") -> None:
    """Exit 2, one line naming the damaged file, its format and ``said``; nothing committed."""
    assert code == 2, err
    line = error_line(err)
    assert f"/b.{fmt.lower()} ({fmt}) is damaged: " in line, line
    assert said in line and SKIP_NOTE in line and "remove or fix the file" in line, line
    assert not (out / "_SUCCESS").exists()


def neardup(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return subprocess.run(
        [sys.executable, "-m", "neardup_spark", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=environ,
    )


def plan_args(**steps: str) -> tuple[str, ...]:
    """``--set plan.STEP=WHERE`` for each of ``steps``."""
    return tuple(a for step, where in steps.items() for a in ("--set", f"plan.{step}={where}"))


@pytest.mark.parametrize(
    ("sketch", "said"),
    [
        ("driver", PYARROW_SAYS),  # read by this process's threads
        ("spark", "reading it with Spark failed (IOException: "),
    ],
    ids=["read-here", "spark-reader"],
)
def test_a_damaged_parquet_file_is_one_line_and_exit_2(tmp_path, sketch, said):
    root = corpus(tmp_path / "in")
    before = digests(root)
    args = (*LOCAL, *plan_args(sketch=sketch), "--explain-plan")
    done = neardup("dedupe", str(root), str(tmp_path / "out"), *args)
    assert f"plan: sketch: {sketch} (" in done.stderr, done.stderr[-3000:]
    assert_refused(done.returncode, done.stderr, tmp_path / "out", said)
    for shown in ("Traceback", "py4j", "at org.apache", "Caused by"):
        assert shown not in done.stderr + done.stdout, done.stderr[-3000:]
    assert digests(root) == before


@pytest.mark.parametrize(
    ("column", "steps", "options"),
    [
        ("text", {"sketch": "tasks"}, ()),  # tasks read the row groups
        ("text", {"sketch": "driver"}, ("--skip-corrupt",)),  # found mid-run: not skipped
        ("url", {"sketch": "driver", "deduplicated": "driver_copy"}, ()),  # copied here
        ("url", {"pairs": "spark", "deduplicated": "task_copy"}, ()),  # copied by Spark tasks
        ("url", {"sketch": "spark", "pairs": "spark", "deduplicated": "spark_join"}, ()),
    ],
    ids=["tasks-read", "skip-corrupt", "copy-here", "copy-in-tasks", "spark-writes"],
)
def test_every_reader_of_a_damaged_file_refuses_it(
    spark, tmp_path, capfd, caplog, column, steps, options
):
    caplog.set_level(logging.INFO, logger="neardup_spark.plan")
    root = corpus(tmp_path / "in", column)
    before = digests(root)
    out = tmp_path / "out"
    args = ("dedupe", str(root), str(out), *LOCAL, *plan_args(**steps), *options)
    code, err = here(spark, capfd, *args)
    spark_read = steps.get("sketch") == "spark"
    said = "reading it with Spark failed" if spark_read else PYARROW_SAYS
    assert_refused(code, err, out, said)
    assert_plain(err)
    assert digests(root) == before
    choices = planned(caplog.records)
    assert {step: choices.get(step) for step in steps} == steps, choices


@pytest.mark.parametrize("where", ["driver", "spark"])
def test_a_nightly_run_refuses_a_damaged_file(spark, tmp_path, capfd, caplog, where):
    """A night read here, or by Spark's pass with its steps as Spark jobs."""
    caplog.set_level(logging.INFO, logger="neardup_spark.plan")
    root = corpus(tmp_path / "in")
    out, index = tmp_path / "out", tmp_path / "index"
    code, err = here(
        spark, capfd, "dedupe", str(root), "--index", str(index), str(out), *LOCAL,
        *plan_args(sketch=where, night=where),
    )  # fmt: skip
    said = PYARROW_SAYS if where == "driver" else "reading it with Spark failed"
    assert_refused(code, err, out, said)
    assert planned(caplog.records)["sketch"] == where


def test_a_damaged_orc_file_is_refused_by_spark_reader(spark, tmp_path, capfd):
    root = tmp_path / "in"
    root.mkdir()
    damaged_orc(root / "b.orc", 1000)
    out = tmp_path / "out"
    code, err = here(spark, capfd, "dedupe", str(root), str(out), *LOCAL)
    assert_refused(code, err, out, "reading it with Spark failed", fmt="ORC")
