"""The command line and spark-submit entry points, each in its own process (own JVM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
BASE = " ".join(f"word{i}" for i in range(50))


def neardup(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(
        [sys.executable, "-m", "neardup_spark", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def small_input(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "corpus.parquet"
    table = pa.table(
        {
            "id": ["a", "b", "c", "d"],
            "text": [BASE, BASE.replace("word20", "other"), "unrelated text " * 10, None],
            "url": ["u1", "u2", "u3", "u4"],
        }
    )
    pq.write_table(table, path)
    return path


@pytest.mark.slow
def test_dedupe_command_end_to_end(small_input, tmp_path):
    out = tmp_path / "out"
    done = neardup(
        "dedupe",
        str(small_input),
        str(out),
        "--master",
        "local[2]",
        "--set",
        "spark.sql.shuffle.partitions=2",
    )
    assert done.returncode == 0, done.stderr
    assert "documents in      4" in done.stdout and "clusters          3" in done.stdout
    assert "docs/s" in done.stdout and str(out) in done.stdout
    clusters = ds.dataset(str(out / "clusters")).to_table().to_pylist()
    assert {r["doc_id"]: r["cluster_id"] for r in clusters} == {
        "a": "a",
        "b": "a",
        "c": "c",
        "d": "d",
    }
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["master"] == "local[2]"
    # A finished output is refused without --overwrite: exit 2, one line, no traceback.
    again = neardup("dedupe", str(small_input), str(out), "--master", "local[2]")
    assert again.returncode == 2
    assert "already holds a finished run" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.slow
def test_user_errors_exit_2_without_traceback(small_input, tmp_path):
    missing = neardup(
        "dedupe",
        str(small_input),
        str(tmp_path / "o"),
        "--text-col",
        "body",
        "--master",
        "local[1]",
    )
    assert missing.returncode == 2
    assert "'body' is not in the input" in missing.stderr and "url (string)" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_arg = neardup("dedupe", str(small_input), str(tmp_path / "o"), "--threshold", "2")
    assert bad_arg.returncode == 2 and "threshold must be in (0, 1]" in bad_arg.stderr
    no_cmd = neardup("dedupe")
    assert no_cmd.returncode == 2 and "Traceback" not in no_cmd.stderr


@pytest.mark.slow
def test_spark_submit_job(small_input, tmp_path):
    import pyspark

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    out = tmp_path / "submitted"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[2]",
            str(REPO / "jobs" / "dedupe.py"),
            str(small_input),
            str(out),
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["clusters"] == 3
    # spark-submit's master wins over --master
    assert report["spark"]["master"] == "local[2]"


D1 = "the crawler fetches each page and follows its links to new pages"


def test_fingerprint_command_reproduces_the_seed(capsys):
    from neardup_spark.cli.app import main

    assert main(["fingerprint", "--method", "simhash", "--hash", "md5", D1]) == 0
    assert capsys.readouterr().out.strip() == "93264c674404019d"
    assert (
        main(["fingerprint", "--hash", "md5", D1.replace("each", "every").replace("new", "other")])
        == 0
    )
    assert capsys.readouterr().out.strip() == "91060e274484039d"


def test_fingerprint_command_other_methods(capsys):
    from neardup_spark.cli.app import main
    from neardup_spark.kernels.exact_fingerprint import exact_fingerprint, to_hex

    assert main(["fingerprint", "--method", "exact", "The  Crawler!"]) == 0
    assert capsys.readouterr().out.strip() == to_hex(exact_fingerprint("the crawler"))
    assert main(["fingerprint", "--method", "minhash", D1]) == 0
    out = capsys.readouterr().out
    assert "8 distinct word 5-shingles" in out and "28 bands x 7 rows" in out
    assert main(["fingerprint", "--method", "bogus", D1]) == 2


@pytest.mark.slow
def test_a_killed_rerun_leaves_the_previous_output_intact(tmp_path):
    import signal
    import time

    from neardup_spark.quality.generate import generate_corpus

    table, _ = generate_corpus(1500, seed=2, mean_words=100)
    pq.write_table(table, tmp_path / "in.parquet")
    out = tmp_path / "out"
    args = (
        "dedupe",
        str(tmp_path / "in.parquet"),
        str(out),
        "--master",
        "local[2]",
        "--no-report",
        "--set",
        "spark.sql.shuffle.partitions=2",
    )
    first = neardup(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    before = ds.dataset(str(out / "clusters")).to_table().sort_by("doc_id")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neardup_spark", *args, "--overwrite"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 240
    while time.time() < deadline and not (out / "_staging").exists():
        time.sleep(0.2)
    time.sleep(2)  # well inside the run: staging exists, nothing committed yet
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (out / "_SUCCESS").exists()
    assert ds.dataset(str(out / "clusters")).to_table().sort_by("doc_id").equals(before)
    again = neardup(*args, "--overwrite")
    assert again.returncode == 0, again.stderr[-2000:]
    assert not (out / "_staging").exists()
    assert ds.dataset(str(out / "clusters")).to_table().sort_by("doc_id").equals(before)
