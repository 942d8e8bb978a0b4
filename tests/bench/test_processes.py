"""Child processes measured as a tree: summed RSS against known allocations, wall time against
a known sleep, CPU seconds against a known busy loop, and timeouts that end the whole tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from neardup_spark.bench.processes import process_tree, run_measured

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


# A process that records when it started and ended (the monotonic clock, which
# time.perf_counter reads too) and leaves a child behind in its process group, still running.
LEAVES_A_STRAGGLER = textwrap.dedent(
    """
    import subprocess, sys, time
    started = time.monotonic()
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.5)
    with open(sys.argv[1], "w") as handle:
        handle.write(f"{started} {time.monotonic()}")
    """
)


def test_wall_seconds_span_the_process_and_no_more(tmp_path):
    """From the process's start to its exit, not counting the stragglers' grace that follows
    a normal exit (its child is still running then): the process's own span lies within the
    measured one, which ends at least the 5 s grace before run_measured returns."""
    times = tmp_path / "times"
    started = time.perf_counter()
    measured = run_measured(
        [sys.executable, "-c", LEAVES_A_STRAGGLER, str(times)], tmp_path / "c.txt"
    )
    returned = time.perf_counter()
    assert measured.returncode == 0, (tmp_path / "c.txt").read_text()
    own_start, own_end = map(float, times.read_text().split())
    assert started <= own_start and own_end <= started + measured.wall_seconds
    assert started + measured.wall_seconds + 5.0 <= returned  # the grace is not counted


# Measured in a fresh interpreter, whose tree is only what it starts: this process's tree also
# holds the suite's JVM and, early in a run, the JVM class archive's build.
CPU_OF_A_BUSY_CHILD = """
import json, resource, subprocess, sys
from neardup_spark.bench.processes import tree_cpu_seconds

def used(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime

before = tree_cpu_seconds()
children, own = used(resource.RUSAGE_CHILDREN), used(resource.RUSAGE_SELF)
subprocess.run([sys.executable, "-c", sys.argv[1], "1.0"], check=True)
after = tree_cpu_seconds()
children, own = used(resource.RUSAGE_CHILDREN) - children, used(resource.RUSAGE_SELF) - own
print(json.dumps({"grew": after - before, "child": children, "own": own}))
"""


def test_cpu_seconds_count_reaped_children():
    """A child that burns 1 CPU second: the tree's CPU seconds grow by what the kernel says the
    child and the measuring process used (getrusage, another source than /proc): by at least
    1 s, and the child counted once."""
    done = subprocess.run(
        [sys.executable, "-c", CPU_OF_A_BUSY_CHILD, BUSY], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["child"] >= 1.0
    # /proc counts in clock ticks (10 ms): four counters summed, each rounded down
    assert measured["grew"] == pytest.approx(measured["child"] + measured["own"], abs=0.05)


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
