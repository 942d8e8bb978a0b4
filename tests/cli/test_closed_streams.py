"""``neardup ... >&-``: a command started with standard output (or any standard stream)
closed runs as with ``/dev/null`` there, says so in one warning line, and exits with the
command's own code; no traceback, and no file the command opens takes the closed stream's
place (whatever the JVM printed would otherwise be written into it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from tests.damaged_files import pages

REPO = Path(__file__).resolve().parents[2]


def closed(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m neardup_spark ARGS`` with standard output (``>&-``) and input (``<&-``)
    closed, in a shell."""
    quoted = " ".join(f"'{a}'" for a in args)
    return subprocess.run(
        ["sh", "-c", f"exec {sys.executable} -m neardup_spark {command} {quoted} >&- <&-"],
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        cwd=REPO,
    )


def test_a_run_with_standard_output_closed_succeeds(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    pq.write_table(pages(0, 40), root / "part-0.parquet")
    out = tmp_path / "out"
    done = closed("dedupe", str(root), str(out), "--master", "local[2]")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "standard output was closed when neardup started" in done.stderr
    assert (out / "_SUCCESS").exists()
    report = json.loads((out / "report.json").read_text())  # nothing else written into it
    assert report["counts"]["input_rows"] == 40
    assert pq.read_table(out / "clusters").num_rows == 40
