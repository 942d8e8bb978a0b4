"""Fault injection for tests of Spark's task retries (a documented hook, off unless set).

When :data:`FAIL_ONCE_ENV` names a file that does not exist yet, the first per-document batch
that sees it creates the file and fails, so exactly one task attempt fails and Spark's retry must
produce the same result (tests/pipeline/test_faults.py).
"""

from __future__ import annotations

import os

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
