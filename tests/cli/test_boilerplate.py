"""``neardup boilerplate`` and ``jobs/boilerplate.py``: a run in its own process, and the user
errors caught before Spark starts (exit 2, one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.cli.app import main
from neardup_spark.cli.boilerplate import summary_lines
from neardup_spark.cli.dedupe import summary_lines as dedupe_summary_lines
from neardup_spark.quality.templates import generate_template_corpus

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    table, _, _ = generate_template_corpus(120, seed=2, mean_words=60, pages_per_site=60)
    path = tmp_path_factory.mktemp("cli-boilerplate") / "corpus.parquet"
    pq.write_table(table, path)
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prefer", "site"], "orders occurrences in --mode repeats only"),
        (["--min-docs", "1"], "boilerplate.min_docs must be an integer >= 2"),
        (["--unit", "sentence"], "invalid choice: 'sentence'"),
    ],
)
def test_user_errors_before_spark_exit_2(corpus, tmp_path, capsys, args, message):
    assert main(["boilerplate", str(corpus), str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_index_refuses_strip_boilerplate(corpus, tmp_path, capsys):
    args = [str(corpus), str(tmp_path / "out"), "--index", str(tmp_path / "index")]
    assert main(["dedupe", *args, "--strip-boilerplate"]) == 2
    assert "--strip-boilerplate is not supported with --index" in capsys.readouterr().err


def test_summary_lines():
    counts = {"documents": 10, "documents_changed": 9, "documents_emptied": 1, "units": 40}
    counts |= {"units_removed": 20, "chars": 1000, "chars_removed": 250, "boilerplate_units": 3}
    report = {
        "counts": counts,
        "settings": {"mode": "template", "min_docs": 5, "unit": "line", "group_col": "site"},
        "wall_seconds": 3.0,
        "output": "out",
    }
    lines = summary_lines(report)
    assert lines[1] == "boilerplate       3 distinct lines in >= 5 documents of one site"
    assert lines[3] == "chars removed     250 of 1,000 (25.0 %)"
    dedupe_report = {
        "counts": {"input_rows": 10, "clusters": 8, "removed": 2, "exact_copies": 1},
        "boilerplate": {"counts": counts},
        "wall_seconds": 1.0,
        "docs_per_second": 10.0,
        "output": "out",
    }
    dedupe_report["counts"] |= {"near_pairs": 1, "candidate_pairs": 2}
    assert (
        "20 units removed from 9 documents (3 distinct)" in dedupe_summary_lines(dedupe_report)[1]
    )


@pytest.mark.slow
@pytest.mark.extended
def test_job_entry_point(corpus, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    local = ["--master", "local[2]", "--set", "spark.sql.shuffle.partitions=2"]
    done = subprocess.run(
        [
            sys.executable,
            "jobs/boilerplate.py",
            str(corpus),
            str(out),
            "--group-col",
            "site",
            *local,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "documents         120 (120 changed, 0 all boilerplate)" in done.stdout
    table = ds.dataset(str(out), format="parquet").to_table()
    assert table.num_rows == 120 and "boilerplate_units" in table.column_names
    report = json.loads((out / "_report.json").read_text())
    assert report["settings"]["group_col"] == "site" and report["counts"]["documents"] == 120
