"""Child processes of the benchmark: the ``neardup`` command line to run, and their resources
measured as a tree (wall time, peak summed RSS, CPU seconds of the process and all its
descendants)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SAMPLE_INTERVAL = 0.2


def _page_size() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4096


PAGE_SIZE = _page_size()


def _parents() -> dict[int, int]:
    """``pid -> parent pid`` of every process visible in ``/proc``."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: parse after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 2:
            out[int(entry)] = int(fields[1])
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its live descendants (``pid`` first; empty when it is gone)."""
    parents = _parents()
    if pid not in parents:
        return []
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    tree, stack = [], [pid]
    while stack:
        current = stack.pop()
        tree.append(current)
        stack.extend(children.get(current, ()))
    return tree


def tree_cpu_seconds(pid: int | None = None) -> float | None:
    """CPU seconds (user + system) used so far by process ``pid`` (default: this one) and all
    its descendants: the JVM and the Python workers of a Spark session started here. Children
    that exited count once reaped. None where ``/proc`` is missing."""
    pids = process_tree(pid or os.getpid())
    if not pids:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return total / ticks


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(pid: int) -> tuple[int, list[int]]:
    """``(summed RSS in bytes, pids)`` of ``pid`` and its descendants."""
    pids = process_tree(pid)
    return sum(rss_bytes(p) for p in pids), pids


class TreeRssSampler:
    """Samples the summed RSS of a process tree every ``interval`` seconds in a thread.

    ``peak_bytes`` is the largest sum seen; ``pids_seen`` every pid ever in the tree.
    """

    def __init__(
        self, pid: int, interval: float = SAMPLE_INTERVAL, extra: Sequence[int] = ()
    ) -> None:
        self.pid = pid
        self.extra = tuple(extra)
        self.interval = interval
        self.peak_bytes = 0
        self.samples = 0
        self.pids_seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> int:
        total, pids = tree_rss(self.pid)
        for other in self.extra:  # e.g. a standalone cluster's workers and their executors
            more, other_pids = tree_rss(other)
            total += more
            pids += other_pids
        self.pids_seen.update(pids)
        self.peak_bytes = max(self.peak_bytes, total)
        self.samples += 1
        return total

    def start(self) -> TreeRssSampler:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_bytes


@dataclass
class Measured:
    """One measured process run."""

    returncode: int | None
    wall_seconds: float
    peak_rss_bytes: int
    samples: int
    timed_out: bool


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _end_group(proc: subprocess.Popen[bytes], grace: float = 10.0, settle: float = 0.0) -> None:
    """End the process group of a row's process (started in its own session, so the group
    holds exactly the row's process, its JVM and Python workers): after ``settle`` seconds
    for it to exit by itself, SIGTERM, then SIGKILL after ``grace`` seconds."""
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline and _group_alive(proc.pid):
        time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(proc.pid):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(proc.pid):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
            time.sleep(0.05)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def run_measured(
    command: Sequence[str],
    log_path: Path,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    interval: float = SAMPLE_INTERVAL,
    also_sample: Sequence[int] = (),
) -> Measured:
    """Run ``command`` (stdout and stderr to ``log_path``), timing it and sampling the summed
    RSS of its process tree (plus the trees of ``also_sample``). On timeout the whole tree (its
    process group) is ended and ``timed_out`` is set. ``wall_seconds`` runs from start to the
    process's exit."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        sampler = TreeRssSampler(proc.pid, interval, also_sample).start()
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        except BaseException:
            sampler.stop()
            _end_group(proc)
            raise
        wall = time.perf_counter() - started
        peak = sampler.stop()
        # On timeout, end the tree; after a normal exit, give stragglers (a JVM shutting down)
        # 5 s, then end them so that they do not weigh on the next row.
        _end_group(proc, grace=10.0, settle=0.0 if timed_out else 5.0)
    return Measured(
        returncode=proc.returncode,
        wall_seconds=wall,
        peak_rss_bytes=peak,
        samples=sampler.samples,
        timed_out=timed_out,
    )


def neardup_command() -> list[str]:
    """The ``neardup`` script of this interpreter's environment (else ``python -m``)."""
    script = Path(sys.executable).parent / "neardup"
    return [str(script)] if script.exists() else [sys.executable, "-m", "neardup_spark"]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env
