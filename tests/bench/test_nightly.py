"""The nightly case's files, progress and exit status (the runs themselves: tests/cli)."""

from __future__ import annotations

import json
import subprocess
import sys

from neardup_spark.bench import nightly
from neardup_spark.bench.nightly import NIGHTLY_JSON, NIGHTLY_MD, run_nightly
from neardup_spark.bench.settings import BenchSettings
from neardup_spark.bench.tables import format_nightly

ROW = {
    "index_docs": 200,
    "new_docs": 50,
    "nightly_seconds": 3.0,
    "full_seconds": 6.0,
    "speedup": 2.0,
    "nightly_cpu_seconds": 4.0,
    "full_cpu_seconds": 9.0,
    "cpu_speedup": 2.25,
    "nightly_growth": 1.0,
    "build_seconds": 5.0,
    "index_bytes": 2**20,
    "input_bytes": 2**21,
    "load_before": 0.5,
    "load_after": 0.7,
}


def test_run_nightly_writes_both_files_and_echoes_the_table(tmp_path, monkeypatch):
    seen: dict = {}

    def fake(workdir, sizes, new, **kwargs):
        seen.update(workdir=workdir, sizes=list(sizes), new=new, **kwargs)
        kwargs["echo"]("[nightly] progress")
        return {"rows": [ROW], "series": None}

    monkeypatch.setattr(nightly, "bench_nightly", fake)
    lines: list[str] = []
    settings = BenchSettings(workdir=str(tmp_path), nightly_sizes=[200], nightly_new=50, seed=4)
    assert run_nightly(settings, lines.append) == 0
    assert seen["workdir"] == str(tmp_path / "nightly") and seen["sizes"] == [200]
    assert seen["new"] == 50 and seen["seed"] == 4 and seen["repeats"] == 1
    assert seen["series"] == (30, 300_000)
    results = json.loads((tmp_path / NIGHTLY_JSON).read_text())
    assert results["rows"] == [ROW] and results["settings"]["index_sizes"] == [200]
    text = (tmp_path / NIGHTLY_MD).read_text()
    assert format_nightly([ROW]) in text
    assert lines == [
        "[nightly] progress",
        text,
        f"[bench] wrote {tmp_path / NIGHTLY_JSON} and {tmp_path / NIGHTLY_MD}",
    ]


def test_a_failed_nightly_case_is_recorded(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no index")

    monkeypatch.setattr(nightly, "bench_nightly", broken)
    assert run_nightly(BenchSettings(workdir=str(tmp_path)), lambda line: None) == 1
    results = json.loads((tmp_path / NIGHTLY_JSON).read_text())
    assert results["error"] == "RuntimeError: no index" and results["rows"] == []
    assert (tmp_path / NIGHTLY_MD).read_text().endswith("failed: RuntimeError: no index\n")


# Run in a fresh interpreter: this process's tree also holds the suite's JVM and, early in a
# run, the JVM class archive's build, whose CPU would count too.
TIMED_BURN = """
import json, subprocess, sys
from neardup_spark.bench.nightly import timed

def burn():
    code = "import time\\nwhile time.process_time() < 0.5:\\n    pass\\n"
    subprocess.run([sys.executable, "-c", code], check=True)
    return "done"

print(json.dumps(timed(burn)))
"""


def test_timed_counts_the_cpu_of_children():
    done = subprocess.run([sys.executable, "-c", TIMED_BURN], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result, wall, cpu = json.loads(done.stdout)
    assert result == "done"
    # /proc counts in clock ticks (10 ms) and the sum of two tick counts can fall short by one
    # or two: allow two ticks below (without the children's CPU it would be about 0).
    assert cpu is not None and 0.48 <= cpu < 1.5
    assert wall >= 0.5  # one single-threaded child burnt 0.5 CPU seconds
