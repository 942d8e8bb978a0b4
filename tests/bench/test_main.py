"""The benchmark's orchestration: sizes, rows, results files, progress lines, exit status."""

from __future__ import annotations

import json

import pytest

from neardup_spark.bench import main as bench_main
from neardup_spark.bench.main import progress_line, run_bench, write_json
from neardup_spark.bench.settings import BenchSettings


@pytest.fixture(autouse=True)
def no_jvm_archive(monkeypatch):
    monkeypatch.setenv("NEARDUP_SPARK_JVM_ARCHIVE", "off")  # building one: test_jvm_archive.py


def test_progress_line():
    done = {"docs": 10_000, "row": "floor", "status": "ok", "wall_seconds": 7.04}
    assert progress_line({**done, "work_seconds": 2.0}) == (
        "[bench] 10,000 floor: ok, wall 7.0 s, work 2.0 s"
    )
    failed = {"docs": 300, "row": "datasketch", "status": "failed", "error": "exit 1: boom"}
    assert progress_line(failed) == "[bench] 300 datasketch: failed (exit 1: boom)"


def test_write_json_replaces_the_file(tmp_path):
    path = tmp_path / "deep" / "results.json"
    write_json(path, {"a": 1})
    write_json(path, {"b": 2})
    assert json.loads(path.read_text()) == {"b": 2}
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]


def test_one_size_one_row(tmp_path):
    lines: list[str] = []
    settings = BenchSettings(
        docs=[120],
        rows=["datasketch"],
        workdir=str(tmp_path),
        timeout=240,
        no_nightly=True,
        no_compile_timing=True,
    )
    assert run_bench(settings, lines.append) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    (row,) = results["rows"]
    assert row["status"] == "ok" and row["docs"] == 120 and row["recall"] is not None
    assert results["settings"]["jvm_archive"] is None and "120" in results["scoring_seconds"]
    markdown = (tmp_path / "results.md").read_text()
    assert lines[0].startswith("[bench] 120 documents: corpus generated (")
    assert lines[1] == progress_line(row)
    assert lines[2] == markdown
    assert lines[3] == f"[bench] wrote {tmp_path / 'results.json'} and {tmp_path / 'results.md'}"
    assert len(lines) == 4  # --no-nightly


def test_no_corpus_fails_every_row_of_that_size(tmp_path, monkeypatch):
    def no_corpus(*args):
        raise RuntimeError("generate failed")

    monkeypatch.setattr(bench_main, "ensure_corpus", no_corpus)
    settings = BenchSettings(
        docs=[50],
        rows=["floor", "datasketch"],
        workdir=str(tmp_path),
        no_nightly=True,
        no_compile_timing=True,
    )
    assert run_bench(settings, print) == 1
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["corpora"] == [{"docs": 50, "error": "generate failed"}]
    assert [(r["row"], r["status"], r["error"]) for r in results["rows"]] == [
        ("floor", "failed", "no corpus"),
        ("datasketch", "failed", "no corpus"),
    ]


def test_the_nightly_case_runs_after_the_table_or_alone(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(bench_main, "run_nightly", lambda settings, echo: calls.append("n") or 1)
    monkeypatch.setattr(bench_main.MainTable, "run", lambda self: calls.append("t") or False)
    assert run_bench(BenchSettings(workdir=str(tmp_path), nightly_only=True), print) == 1
    assert calls == ["n"]
    assert run_bench(BenchSettings(workdir=str(tmp_path)), print) == 1  # the nightly failed
    assert calls == ["n", "t", "n"]
    assert run_bench(BenchSettings(workdir=str(tmp_path), no_nightly=True), print) == 0
    assert calls == ["n", "t", "n", "t"]
