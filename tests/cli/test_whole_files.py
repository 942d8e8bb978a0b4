"""``neardup dedupe`` on an input holding a file cut short: exit 2 with one line naming the file,
its format and where reading stopped (no Py4J call, no stack trace), or with ``--skip-corrupt``
the file skipped whole, a warning line on the console, and ``report.json`` listing it; the
rows kept are exactly those of the whole files. Parquet inputs' footers are read by this
process (pipeline/facts.py) and the rule holds there too."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.spark_state import cli_on_session

REPO = Path(__file__).resolve().parents[2]
LOCAL = ("--master", "local[2]", "--set", "spark.sql.shuffle.partitions=2")


def lines(start: int, n: int) -> bytes:
    rows = (
        {"id": f"d{i}", "text": f"page {i} " + " ".join(f"w{i}x{j}" for j in range(12))}
        for i in range(start, n)
    )
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def json_corpus(root: Path) -> tuple[Path, int]:
    """Two whole gzip files (30 rows) and one cut short; (directory, size of the cut file)."""
    root.mkdir()
    (root / "a.jsonl.gz").write_bytes(gzip.compress(lines(0, 20)))
    (root / "b.jsonl.gz").write_bytes(gzip.compress(lines(20, 30)))
    data = gzip.compress(lines(100, 2100))
    (root / "cut.jsonl.gz").write_bytes(data[: len(data) * 6 // 10])
    return root, len(data) * 6 // 10


def kept_ids(out: Path) -> list[str]:
    return sorted(ds.dataset(str(out / "clusters")).to_table().column("doc_id").to_pylist())


def error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


def assert_plain(stderr: str) -> None:
    for word in ("Traceback", "py4j", "Py4J", "o6", "at org.apache", "EOFException"):
        assert word not in stderr, (word, stderr)


def here(spark, capfd, *args: str) -> tuple[int, str]:
    """``neardup ARGS`` in this process on the suite's session: (exit code, stderr)."""
    capfd.readouterr()
    with cli_on_session(spark) as run, redirect_stdout(StringIO()):
        code = run(args)
    return code, capfd.readouterr().err


def test_a_gzip_file_cut_short_is_refused_or_skipped_whole(spark, tmp_path, capfd, caplog):
    root, size = json_corpus(tmp_path / "in")
    code, err = here(spark, capfd, "dedupe", str(root), str(tmp_path / "o1"), *LOCAL)
    assert code == 2, err
    line = error_line(err)
    assert "cut.jsonl.gz (JSON lines, gzip): the gzip stream stops at byte" in line
    assert f"{size:,}" in line and "--skip-corrupt" in line
    assert_plain(err)
    code, err = here(
        spark, capfd, "dedupe", str(root), str(tmp_path / "o2"), "--skip-corrupt", *LOCAL
    )
    assert code == 0, err
    warned = [r.message for r in caplog.records if "skipping a whole input file" in r.message]
    assert len(warned) == 1 and "cut.jsonl.gz (JSON lines, gzip)" in warned[0]
    assert kept_ids(tmp_path / "o2") == sorted(f"d{i}" for i in range(30))
    report = json.loads((tmp_path / "o2" / "report.json").read_text())
    assert report["counts"]["input_rows"] == 30
    [entry] = report["skipped_files"]
    assert Path(entry["path"]).name == "cut.jsonl.gz" and entry["reason"] == "truncated"
    assert entry["stopped_at_byte"] == size and 0 < entry["lines_read"] < 2000


def test_a_parquet_file_cut_short_is_refused_or_skipped_whole_when_read_here(
    spark, tmp_path, capfd
):
    root = tmp_path / "in"
    root.mkdir()
    texts = [f"page {i} " + " ".join(f"w{i}x{j}" for j in range(12)) for i in range(40)]
    pq.write_table(
        pa.table({"id": [f"d{i}" for i in range(30)], "text": texts[:30]}), root / "a.parquet"
    )
    pq.write_table(
        pa.table({"id": [f"d{i}" for i in range(30, 40)], "text": texts[30:]}), root / "cut.parquet"
    )
    data = (root / "cut.parquet").read_bytes()
    (root / "cut.parquet").write_bytes(data[: len(data) - 100])
    code, err = here(spark, capfd, "dedupe", str(root), str(tmp_path / "o1"), *LOCAL)
    assert code == 2, err
    assert "cut.parquet (Parquet): no readable footer in its last bytes" in error_line(err)
    assert_plain(err)
    code, err = here(
        spark, capfd, "dedupe", str(root), str(tmp_path / "o2"), "--skip-corrupt", *LOCAL
    )
    assert code == 0, err
    assert kept_ids(tmp_path / "o2") == sorted(f"d{i}" for i in range(30))
    report = json.loads((tmp_path / "o2" / "report.json").read_text())
    assert [(Path(s["path"]).name, s["reason"]) for s in report["skipped_files"]] == [
        ("cut.parquet", "unreadable footer")
    ]


@pytest.mark.slow
def test_in_its_own_process_no_java_stack_trace_and_a_warning_on_the_console(tmp_path):
    root, _ = json_corpus(tmp_path / "in")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}

    def neardup(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "neardup_spark", "dedupe", str(root), *args, *LOCAL]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)

    refused = neardup(str(tmp_path / "o1"))
    assert refused.returncode == 2, refused.stderr
    assert "cut.jsonl.gz (JSON lines, gzip)" in error_line(refused.stderr)
    assert_plain(refused.stderr)
    skipped = neardup(str(tmp_path / "o2"), "--skip-corrupt")
    assert skipped.returncode == 0, skipped.stderr
    warnings = [
        line for line in skipped.stderr.splitlines() if "skipping a whole input file" in line
    ]
    assert (
        len(warnings) == 1
        and "cut.jsonl.gz (JSON lines, gzip): the gzip stream stops" in warnings[0]
    )
    assert kept_ids(tmp_path / "o2") == sorted(f"d{i}" for i in range(30))
