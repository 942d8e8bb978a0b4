"""``neardup decontaminate --remote sc://...``: the Spark corpus pass over a real Spark Connect
server (a process of its own), its outputs the same as the classic run's on the suite's
session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from neardup_spark.bench.connect_server import connect_server
from neardup_spark.pipeline.decontaminate import run_decontaminate
from tests.decontaminate.test_pipeline import CONFIG, inputs  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.extended]


def sorted_rows(path: Path) -> list[tuple]:
    return sorted(tuple(sorted(r.items(), key=str)) for r in pq.read_table(path).to_pylist())


def test_spark_pass_over_connect_matches_classic(spark, inputs, tmp_path):  # noqa: F811
    corpus = str(inputs["root"] / "corpus.parquet")
    ref = str(inputs["ref"])
    classic = tmp_path / "classic"
    expected = run_decontaminate(spark, corpus, [ref], str(classic), CONFIG, where="spark")
    settings = {"spark.sql.shuffle.partitions": "2"}
    with connect_server(tmp_path / "server", spark=settings) as server:
        out = tmp_path / "connect"
        env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
        args = [corpus, "--reference", ref, str(out), "--corpus-pass", "spark"]
        args += ["--reference-id", "task_id", "--reference-fields", "prompt"]
        done = subprocess.run(
            [sys.executable, "-m", "neardup_spark", "decontaminate", *args, "--remote", server.url],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            env=env,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["plan"]["corpus"]["where"] == "spark"
    for key in ("counts", "benchmarks", "documents_per_item", "largest_matches"):
        assert report[key] == expected[key], key
    for table in ("matches", "clean"):
        assert sorted_rows(out / table) == sorted_rows(classic / table), table
