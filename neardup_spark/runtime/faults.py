"""Test hooks for faults (documented, off unless their environment variable is set).

When :data:`FAIL_ONCE_ENV` names a file that does not exist yet, the first per-document batch
that sees it creates the file and fails, so exactly one task attempt fails and Spark's retry must
produce the same result (tests/pipeline/test_bad_input.py). :func:`pause_if_asked` holds a run
at a named point so a test can kill it there.
"""

from __future__ import annotations

import os
import time

FAIL_ONCE_ENV = "NEARDUP_FAIL_ONCE_MARKER"


def fail_once_if_asked() -> None:
    """Raise once per marker file named by :data:`FAIL_ONCE_ENV`; nothing when it is unset."""
    marker = os.environ.get(FAIL_ONCE_ENV)
    if not marker:
        return
    try:
        with open(marker, "x", encoding="utf-8") as handle:
            handle.write("failed once\n")
    except FileExistsError:
        return
    raise RuntimeError(f"injected task failure ({FAIL_ONCE_ENV}={marker})")


# Test hook for signals while Spark works: when SLOW_BATCH_ENV names a file in a directory that
# exists, each per-document batch creates it (if absent) and then sleeps SLOW_BATCH_SECONDS, so a
# test can signal the run while a Spark job and its Python workers are busy
# (tests/cli/test_signals.py). A long-lived process (a Connect server's workers) can be given
# the variable up front and armed later by creating the directory (tests/cli/test_connect.py).
SLOW_BATCH_ENV = "NEARDUP_SLOW_BATCH_MARKER"
SLOW_BATCH_SECONDS = 60


def _armed_slow_batch_marker() -> str | None:
    """The :data:`SLOW_BATCH_ENV` marker when the hook is armed (set, its directory exists)."""
    marker = os.environ.get(SLOW_BATCH_ENV)
    if not marker or not os.path.isdir(os.path.dirname(os.path.abspath(marker))):
        return None
    return marker


def slow_down_if_asked() -> None:
    """Write the :data:`SLOW_BATCH_ENV` marker and sleep; nothing when it is unset."""
    marker = _armed_slow_batch_marker()
    if marker is None:
        return
    with open(marker, "a", encoding="utf-8") as handle:
        handle.write(f"batch in pid {os.getpid()}\n")
    time.sleep(SLOW_BATCH_SECONDS)


def wait_for_a_busy_batch_if_asked() -> None:
    """While :data:`SLOW_BATCH_ENV` is armed, wait (up to :data:`SLOW_BATCH_SECONDS`) until a
    batch has written its marker: the id check, run alongside the per-document pass, then fails
    while that batch is busy, not before its worker started (tests/cli/test_console.py)."""
    marker = _armed_slow_batch_marker()
    if marker is None:
        return
    deadline = time.monotonic() + SLOW_BATCH_SECONDS
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.05)


def batch_faults() -> None:
    """The hooks a per-document batch runs first: :func:`fail_once_if_asked`,
    :func:`slow_down_if_asked`."""
    fail_once_if_asked()
    slow_down_if_asked()


# Test hook for kills at a known point: when PAUSE_AT_ENV names a point a run reaches, the run
# writes the file PAUSE_MARKER_ENV names and sleeps until the test deletes it (the run goes on)
# or PAUSE_SECONDS pass, so a test can SIGKILL it exactly there, or hold it there
# (tests/cli/test_dedupe.py, tests/nightly). Points: "before_commit" (outputs staged, nothing
# committed), "in_commit" (OUTPUT's previous entries removed, the new ones not yet moved in),
# "before_index_commit" (a nightly batch's segment and results written, CURRENT not replaced),
# "after_STAGE" (a dedupe run's stage result and its completion marker written, for STAGE in
# sketch, exact, candidates, verify, components: pipeline/resume.py).
PAUSE_AT_ENV = "NEARDUP_PAUSE_AT"
PAUSE_MARKER_ENV = "NEARDUP_PAUSE_MARKER"
PAUSE_SECONDS = 600


def pause_if_asked(point: str) -> None:
    """Write the marker and wait while it exists when :data:`PAUSE_AT_ENV` is ``point``;
    nothing otherwise."""
    if os.environ.get(PAUSE_AT_ENV) != point:
        return
    marker = os.environ.get(PAUSE_MARKER_ENV)
    if marker:
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(f"paused at {point}\n")
    deadline = time.monotonic() + PAUSE_SECONDS
    while time.monotonic() < deadline and (not marker or os.path.exists(marker)):
        time.sleep(0.05)
