"""Child processes measured as a tree: summed RSS against known allocations, wall time against
a known sleep, CPU seconds against a known busy loop, and timeouts that end the whole tree."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from neardup_spark.bench.processes import process_tree, run_measured, tree_cpu_seconds

MB = 1024 * 1024

GRANDCHILD = textwrap.dedent(
    """
    import os, sys, time
    with open(sys.argv[1], "w") as handle:
        handle.write(str(os.getpid()))
    data = bytearray(int(sys.argv[2]))
    for i in range(0, len(data), 4096):  # zero pages are not resident until touched
        data[i] = 1
    time.sleep(float(sys.argv[3]))
    """
)
PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    grandchild, pid_file, own, child_size, sleep = sys.argv[1:]
    data = bytearray(int(own))
    for i in range(0, len(data), 4096):
        data[i] = 1
    child = subprocess.Popen([sys.executable, "-c", grandchild, pid_file, child_size, sleep])
    time.sleep(float(sleep))
    child.wait()
    """
)
BUSY = "import time\nwhile time.process_time() < float(__import__('sys').argv[1]):\n    pass\n"


def _tree_command(own_mb: int, child_mb: int, sleep: float, pid_file: Path) -> list[str]:
    """A python process holding ``own_mb`` that starts one holding ``child_mb``."""
    return [
        sys.executable,
        "-c",
        PARENT,
        GRANDCHILD,
        str(pid_file),
        str(own_mb * MB),
        str(child_mb * MB),
        str(sleep),
    ]


def test_peak_rss_is_the_sum_over_the_tree(tmp_path):
    """150 MB in a process and 100 MB in its child: the peak rises by 250 MB over the same tree
    holding 1 MB each (interpreters alike), so neither one process alone (150 or 100) nor
    double counting (500) passes."""
    baseline = run_measured(
        _tree_command(1, 1, 1.5, tmp_path / "a.pid"), tmp_path / "a.txt", timeout=60
    )
    loaded = run_measured(
        _tree_command(151, 101, 1.5, tmp_path / "b.pid"), tmp_path / "b.txt", timeout=60
    )
    for measured, log in ((baseline, "a.txt"), (loaded, "b.txt")):
        assert measured.returncode == 0, (tmp_path / log).read_text()
        assert not measured.timed_out and measured.samples >= 5
    added = loaded.peak_rss_bytes - baseline.peak_rss_bytes
    assert 225 * MB <= added <= 275 * MB, added / MB


def test_wall_seconds_span_the_process_and_no_more(tmp_path):
    """A tree that sleeps 2 s: measured from start to exit, not counting the 5 s stragglers'
    grace that follows a normal exit."""
    started = time.perf_counter()
    measured = run_measured(_tree_command(1, 1, 2.0, tmp_path / "c.pid"), tmp_path / "c.txt")
    outside = time.perf_counter() - started
    assert measured.returncode == 0
    assert 2.0 <= measured.wall_seconds < 2.0 + 3.0
    assert measured.wall_seconds <= outside


def test_cpu_seconds_count_reaped_children():
    """A child that burns 1 CPU second: this process tree's CPU seconds grow by that much
    (plus the child interpreter's start), and by no more than a few tenths."""
    before = tree_cpu_seconds()
    subprocess.run([sys.executable, "-c", BUSY, "1.0"], check=True)
    after = tree_cpu_seconds()
    assert before is not None and after is not None
    assert 1.0 <= after - before < 2.0


def test_timeout_ends_the_whole_tree(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    started = time.perf_counter()
    measured = run_measured(
        _tree_command(1, 1, 120, pid_file),
        tmp_path / "log.txt",
        timeout=5,
    )
    assert measured.timed_out
    assert time.perf_counter() - started < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while process_tree(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process_tree(grandchild) == []


def test_process_tree_of_this_process():
    tree = process_tree(os.getpid())
    assert tree[0] == os.getpid()
    assert process_tree(2**31 - 1) == []
