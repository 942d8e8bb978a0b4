"""``neardup decontaminate``: bad input refused in one line (exit 2) before Spark starts, and a
whole run in its own process."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.cli.app import main

REPO = Path(__file__).resolve().parents[2]
ITEM = "Given a list of integers, return the sum of the squares of the odd numbers only please."


@pytest.fixture
def corpus(tmp_path) -> Path:
    texts = ["nothing to see here", f"Intro.\n{ITEM.upper()}\nOutro.", "more plain text"]
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "text": texts}), path)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    with gzip.open(path, "wt") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    return path


@pytest.mark.parametrize(
    ("rows", "args", "message"),
    [
        ([], [], "holds no items"),
        (
            [{"id": "a", "question": ITEM}, {"id": "b", "question": " ?! "}],
            [],
            "reference item 'b' of ref.jsonl.gz has no text",
        ),
        (
            [{"id": "a", "question": ITEM}, {"id": "b", "question": None}],
            [],
            "reference item 'b' of ref.jsonl.gz has no text",
        ),
        ([{"key": "a", "question": ITEM}], [], "has no id column 'id'"),
        (
            [{"id": "a", "question": ITEM}],
            ["--reference-fields", "question,answer"],
            "has no field 'answer'",
        ),
        ([{"id": "a", "question": ITEM}], ["--reference-id", "task"], "has no id column 'task'"),
        (
            [{"id": "a", "question": ITEM}, {"id": "a", "question": ITEM}],
            [],
            "item id 'a' is repeated",
        ),
        ([{"id": "a", "question": ITEM}], ["--ngram", "0"], "--ngram must be an integer >= 1"),
    ],
)
def test_bad_reference_exit_2(corpus, tmp_path, capsys, rows, args, message):
    ref = write_jsonl(tmp_path / "ref.jsonl.gz", rows)
    out = tmp_path / "out"
    assert main(["decontaminate", str(corpus), "--reference", str(ref), str(out), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_missing_corpus_and_reference_exit_2(tmp_path, capsys):
    ref = write_jsonl(tmp_path / "ref.jsonl.gz", [{"id": "a", "question": ITEM}])
    out = str(tmp_path / "out")
    assert main(["decontaminate", str(tmp_path / "nope"), "--reference", str(ref), out]) == 2
    assert "input not found" in capsys.readouterr().err
    missing = str(tmp_path / "no-ref")
    assert main(["decontaminate", str(ref), "--reference", missing, out]) == 2
    assert "--reference: input not found" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.extended
def test_cli_run(corpus, tmp_path):
    ref = write_jsonl(tmp_path / "bench.jsonl.gz", [{"id": "q1", "question": ITEM}])
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(corpus), "--reference", str(ref), str(out), "--corpus-pass", "spark"]
    done = subprocess.run(
        [sys.executable, "-m", "neardup_spark", "decontaminate", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "items found       1 of 1" in done.stdout
    rows = pq.read_table(out / "matches").to_pylist()
    text = f"Intro.\n{ITEM.upper()}\nOutro."
    assert rows == [
        {
            "doc_id": 2,
            "item_id": "q1",
            "benchmark": "bench.jsonl.gz",
            "ngrams": 5,
            "item_share": 1.0,
            "spans": [{"start": 7, "end": 7 + len(ITEM) - 1}],
        }
    ]
    assert text[7 : 7 + len(ITEM) - 1] == ITEM.upper()[:-1]
    assert pq.read_table(out / "clean").column("id").to_pylist() == [1, 3]
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["contaminated"] == 1 and (out / "_SUCCESS").exists()
    # a second run refuses the finished OUTPUT unless --overwrite
    again = subprocess.run(
        [sys.executable, "-m", "neardup_spark", "decontaminate", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_spark_submit_entry_point_takes_the_same_options(corpus, tmp_path, capsys):
    """``jobs/decontaminate.py`` (spark-submit's): the command's options, its errors (exit 2
    before Spark starts)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("jobs_decon", REPO / "jobs" / "decontaminate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ref = write_jsonl(tmp_path / "ref.jsonl.gz", [{"key": "a", "question": ITEM}])
    assert module.main([str(corpus), "--reference", str(ref), str(tmp_path / "out")]) == 2
    assert "has no id column 'id'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0 and "--remote" in capsys.readouterr().out
