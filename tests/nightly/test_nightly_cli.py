"""``neardup dedupe --index`` and ``neardup index info|compact`` (in this process) and
``jobs/dedupe.py --index``."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.nightly.history import (
    CRAFTED_DAY1,
    REPO,
    rows_table,
)


@pytest.fixture
def cli(spark, monkeypatch):
    """``neardup ...`` in this process: the commands get the suite's session and do not stop
    it."""
    from neardup_spark.cli.app import main

    for command in ("dedupe", "index"):
        monkeypatch.setattr(f"neardup_spark.cli.{command}.build_session", lambda *_, **__: spark)
    # On the class: an instance attribute, once undone, would shadow later class-level patches
    monkeypatch.setattr(type(spark), "stop", lambda self: None)
    return main


def jobs_dedupe_main():
    """``main`` of ``jobs/dedupe.py``, the spark-submit entry point."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("jobs_dedupe", REPO / "jobs" / "dedupe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_cli_indexed_runs_info_and_compact(cli, tmp_path, capsys):
    day = tmp_path / "day"
    day.mkdir()
    pq.write_table(rows_table(CRAFTED_DAY1), day / "part-0.parquet")
    index, out = tmp_path / "index", tmp_path / "out"
    args = [str(day), str(out), "--index", str(index), "--index-buckets", "4"]
    assert cli(["dedupe", *args]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "new documents     7 (0 re-crawled)" in printed and "kept (new)        6" in printed
    assert "index             7 documents, 6 clusters, version v000001-" in printed
    assert not (out / "report.html").exists() and (out / "_SUCCESS").is_file()
    # The same batch again, through the spark-submit entry point: nothing is added.
    assert jobs_dedupe_main()(args) == 0
    assert "was already indexed: nothing added" in capsys.readouterr().out
    assert cli(["index", "info", str(index)]) == 0
    info = capsys.readouterr().out
    assert "documents         7 in 6 clusters" in info and "segments          1 (4 buckets" in info
    assert "num_perm 200, seed 42, 28 bands x 7 rows" in info and "batches           1" in info
    assert cli(["index", "compact", str(index), "--buckets", "2"]) == 0
    assert "segments          1 -> 1 (2 buckets)" in capsys.readouterr().out
    assert cli(["index", "info", str(index), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["buckets"] == 2 and summary["version"].startswith("v000002-")
    assert summary["counts"]["documents"] == 7 and len(summary["batches"]) == 1


def test_cli_user_errors_exit_2(cli, history, tmp_path, capsys):
    index, day3 = str(history["index"]), str(history["root"] / "day3")
    out = str(tmp_path / "out")
    cases = [
        (["--index", index, "--num-perm", "128"], r"num_perm (index 200, this run 128)"),
        (["--index", index, "--method", "simhash"], "--method minhash only"),
        (["--index-buckets", "8"], "--index-buckets needs --index"),
        (["--index", index, "--index-buckets", "0"], "--index-buckets must be >= 1"),
    ]
    for extra, message in cases:
        assert cli(["dedupe", day3, out, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert cli(["index", "info", str(tmp_path / "nothing")]) == 2
    assert "no index at" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
