"""One row of the benchmark run in its own measured process, and what is read back from it."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.bench.children import STATS_FILE
from neardup_spark.bench.corpora import Corpus
from neardup_spark.bench.rows import read_timings, row_command, run_row
from neardup_spark.bench.settings import BenchSettings


def test_row_commands():
    settings = BenchSettings(master="local[3]", threshold=0.7)
    neardup = row_command("neardup-simhash", "C", "O", settings)
    assert neardup[-10:] == [
        "dedupe",
        "C",
        "O",
        "--method",
        "simhash",
        "--master",
        "local[3]",
        "--threshold",
        "0.7",
        "--overwrite",
    ]
    floor = row_command("floor", "C", "O", settings)
    assert floor[-8:] == [
        "bench-row",
        "floor",
        "C",
        "O",
        "--master",
        "local[3]",
        "--threshold",
        "0.7",
    ]


def test_rows_above_their_limit_are_skipped(tmp_path):
    settings = BenchSettings(mllib_max_docs=1_000, datasketch_max_docs=50)
    corpus = Corpus(docs=1_200, root=tmp_path)
    sketch = run_row("datasketch", corpus, tmp_path, settings)
    assert sketch["status"] == "skipped" and sketch["error"] == "above --datasketch-max-docs 50"
    mllib = run_row("spark-mllib", corpus, tmp_path, settings)
    assert mllib["status"] == "skipped" and mllib["error"] == "above --mllib-max-docs 1,000"
    assert "wall_seconds" not in sketch and not (tmp_path / "runs").exists()


@pytest.fixture
def tiny_corpus(tmp_path) -> Corpus:
    base = " ".join(f"w{i}" for i in range(60))
    root = tmp_path / "corpus-root"
    (root / "corpus").mkdir(parents=True)
    table = pa.table({"id": ["a", "b", "c"], "text": [base, base, "other words here"]})
    pq.write_table(table, root / "corpus" / "part-0.parquet")
    return Corpus(docs=3, root=root)


def test_a_finished_row_has_its_timings(tmp_path, tiny_corpus):
    record = run_row("datasketch", tiny_corpus, tmp_path, BenchSettings(timeout=120))
    assert record["status"] == "ok", record
    assert record["counts"] == {"docs": 3, "empty": 0}
    # The process's wall time holds the work it timed inside.
    assert 0 < record["work_seconds"] <= record["wall_seconds"]
    assert record["docs_per_second"] == pytest.approx(3 / record["work_seconds"])
    assert record["docs_per_second_wall"] == pytest.approx(3 / record["wall_seconds"])
    assert record["peak_rss_bytes"] > 0 and record["rss_samples"] >= 1
    assert (tmp_path / "runs" / "3" / "datasketch" / "log.txt").is_file()


def test_a_failed_row_keeps_the_end_of_its_log(tmp_path):
    gone = Corpus(docs=3, root=tmp_path / "no-such-corpus")
    record = run_row("datasketch", gone, tmp_path, BenchSettings(timeout=120))
    assert record["status"] == "failed"
    assert record["error"].startswith("exit 1: ") and "Error" in record["error"]


def test_neardup_timings_come_from_its_report_and_printed_start_up(tmp_path):
    (tmp_path / "out").mkdir()
    report = {"wall_seconds": 4.25, "stage_seconds": {"read": 1.0}, "counts": {"removed": 2}}
    (tmp_path / "out" / "report.json").write_text(json.dumps(report))
    # As `neardup dedupe` prints it after its summary.
    (tmp_path / "log.txt").write_text("wall time         4.2 s (+ 3.2 s Spark start-up)\n")
    timings = read_timings("neardup-minhash", tmp_path / "out", tmp_path / "log.txt")
    assert timings == {
        "spark_start_seconds": 3.2,
        "work_seconds": 4.25,
        "stage_seconds": {"read": 1.0},
        "counts": {"removed": 2},
    }
    (tmp_path / "out" / STATS_FILE).write_text("{}")
    with pytest.raises(KeyError):  # recorded as "no timings" by run_row
        read_timings("floor", tmp_path / "out", tmp_path / "log.txt")


def test_boilerplate_rows(tmp_path):
    settings = BenchSettings(master="local[2]")
    strip = row_command("neardup-strip", "C", "O", settings)
    assert strip[-11:-1] == row_command("neardup-minhash", "C", "O", settings)[-10:]
    assert strip[-1] == "--strip-boilerplate"
    boilerplate = row_command("neardup-boilerplate", "C", "O", settings)
    assert boilerplate[-6:] == ["boilerplate", "C", "O", "--master", "local[2]", "--overwrite"]
    (tmp_path / "out").mkdir()
    report = {
        "wall_seconds": 2.5,
        "stage_seconds": {"boilerplate": 1.0},
        "counts": {"documents": 9},
    }
    (tmp_path / "out" / "_report.json").write_text(json.dumps(report))
    (tmp_path / "log.txt").write_text("wall time 2.5 s (+ 1.5 s Spark start-up)\n")
    timings = read_timings("neardup-boilerplate", tmp_path / "out", tmp_path / "log.txt")
    assert timings["work_seconds"] == 2.5 and timings["spark_start_seconds"] == 1.5
