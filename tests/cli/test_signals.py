"""SIGINT and SIGTERM, real signals to real runs: a run ends within 10 s with exit 130 or 143 and
one line, leaves no JVM or Python worker behind, commits nothing, and a rerun resumes. Signalled
while Spark tasks are busy (``NEARDUP_SLOW_BATCH_MARKER``) and while the driver holds between
steps (``NEARDUP_PAUSE_AT``), in dedupe, a nightly run and ingest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.runtime.faults import PAUSE_AT_ENV, PAUSE_MARKER_ENV, SLOW_BATCH_ENV
from tests.ingest.conftest import html_response, page, write_warc
from tests.nightly.history import tree_state
from tests.spark_state import cli_on_session

REPO = Path(__file__).resolve().parents[2]
LOCAL = ("--master", "local[2]", "--set", "spark.sql.shuffle.partitions=2")
TOKEN_ENV = "NEARDUP_SIGNAL_TEST_TOKEN"
STOP_WITHIN = 10.0
pytestmark = pytest.mark.slow


def corpus(path: Path, docs: int = 60) -> Path:
    path.mkdir(parents=True)
    words = [f"w{i}" for i in range(400)]
    texts = [" ".join(words[i : i + 40]) for i in range(docs)]
    pq.write_table(
        pa.table({"id": [f"d{i:03d}" for i in range(docs)], "text": texts}), path / "p.parquet"
    )
    return path


def processes_with(token: str) -> list[str]:
    """Live processes whose environment holds ``token`` (the run and all it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def signal_run(args, sig, tmp_path, *, wait_for: str, point: str | None = None):
    """Start ``neardup ARGS``; once the marker exists (a busy task's, or the pause point's),
    send ``sig``; return (exit code, seconds from the signal to the exit, stderr, token)."""
    marker = tmp_path / f"marker-{uuid.uuid4().hex[:8]}"
    token = uuid.uuid4().hex
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, TOKEN_ENV: token}
    env[SLOW_BATCH_ENV if wait_for == "task" else PAUSE_MARKER_ENV] = str(marker)
    if point is not None:
        env[PAUSE_AT_ENV] = point
    err = tmp_path / f"stderr-{token[:8]}"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "neardup_spark", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists() and proc.poll() is None, err.read_text()  # signalled mid-run
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        took = time.monotonic() - sent
    return code, took, err.read_text(), token


def assert_clean_stop(code, took, stderr, token, sig):
    assert code == 128 + sig, stderr
    assert took <= STOP_WITHIN, f"{took:.1f} s"
    lines = [line for line in stderr.splitlines() if "neardup_spark.progress" not in line]
    assert len(lines) == 1 and lines[0].startswith(f"interrupted by {sig.name}: "), stderr
    assert "run the same command again" in lines[0]
    # The JVM's children (Python workers) see their parent go: within the same 10 s, polled
    # (a fixed half-second sleep before one look was a race on a loaded machine)
    deadline = time.monotonic() + STOP_WITHIN
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(token) == []


def test_sigterm_while_tasks_run_then_a_rerun_finishes(spark, tmp_path, capsys):
    """The signalled run in a process of its own; the rerun in this process, on the suite's
    session (it finishes the run the signal stopped)."""
    data, out = corpus(tmp_path / "corpus"), tmp_path / "out"
    tasks = ("--set", "plan.sketch=spark")  # the per-document pass as Spark tasks
    result = signal_run(
        ("dedupe", str(data), str(out), *LOCAL, *tasks), signal.SIGTERM, tmp_path, wait_for="task"
    )
    print(f"stopped in {result[1]:.1f} s")
    assert_clean_stop(*result, signal.SIGTERM)
    assert not (out / "_SUCCESS").exists()
    assert not (out / "_lock").exists()  # released: the rerun need not wait
    with cli_on_session(spark) as run:
        assert run(["dedupe", str(data), str(out), "--no-report"]) == 0, capsys.readouterr().err
    assert (out / "_SUCCESS").exists()


def test_sigint_between_stages_keeps_the_finished_stages_for_the_rerun(tmp_path):
    data, out = corpus(tmp_path / "corpus"), tmp_path / "out"
    result = signal_run(
        ("dedupe", str(data), str(out), *LOCAL),
        signal.SIGINT,
        tmp_path,
        wait_for="pause",
        point="after_sketch",
    )
    assert_clean_stop(*result, signal.SIGINT)
    staged = list((out / "_staging").glob("*/stages/sketch.json"))
    assert staged, "the finished stages are kept for a rerun to resume"


def test_sigterm_in_a_night_before_its_commit_leaves_the_index_as_it_was(spark, tmp_path):
    from neardup_spark.config import build_config
    from neardup_spark.nightly.run import run_incremental

    index = tmp_path / "index"
    day1, day2 = corpus(tmp_path / "day1", 40), corpus(tmp_path / "day2", 60)
    # The index's first night, on this suite's session (the signal goes to the second one).
    run_incremental(spark, str(day1), str(tmp_path / "o1"), str(index), build_config())
    before = tree_state(index)
    result = signal_run(
        ("dedupe", str(day2), str(tmp_path / "o2"), "--index", str(index), *LOCAL),
        signal.SIGTERM,
        tmp_path,
        wait_for="pause",
        point="before_index_commit",
    )
    assert_clean_stop(*result, signal.SIGTERM)
    # Nothing of the index rewritten (but the job's ownership record, which lists what the
    # night was about to write); its new files are debris.
    before.pop("_neardup.json")
    after = {path: state for path, state in tree_state(index).items() if path in before}
    assert after == before
    name = (index / "CURRENT").read_text().strip()
    assert json.loads((index / name / "manifest.json").read_text())["version"] == 1
    assert not (index / "_lock").exists()


def test_sigint_during_ingest(tmp_path):
    warcs, out = tmp_path / "warcs", tmp_path / "ingested"
    records = [html_response(f"r{i}", page(f"page {i} about rivers").encode()) for i in range(5)]
    write_warc(warcs / "a.warc.gz", records, compress=True)
    result = signal_run(
        ("ingest", str(warcs), str(out), *LOCAL), signal.SIGINT, tmp_path, wait_for="task"
    )
    assert_clean_stop(*result, signal.SIGINT)
    assert not (out / "_SUCCESS").exists()
