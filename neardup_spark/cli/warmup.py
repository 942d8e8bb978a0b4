"""``neardup warmup``: compile the kernels into numba's on-disk cache now, so that the first run
does not (an install step: ``make setup`` runs it; on a cluster, run it where the executors'
Python and package live, e.g. while building their image)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

from neardup_spark.errors import EXIT_OK, MachineError

# A fresh interpreter: numba must not be imported before the CPU features are chosen.
WARM_CODE = "from neardup_spark.runtime.worker_daemon import warm_kernels; print(warm_kernels())"
WARM_TIMEOUT_SECONDS = 1800


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "warmup",
        help="compile the kernels into numba's cache now (an install step), not in the first run",
    )
    parser.set_defaults(func=run_warmup)


def kernel_seconds() -> float:
    """Seconds a fresh process takes to have every kernel ready (compiled, or loaded). A
    process that fails (numba or its compiler broken, a cache directory it cannot write, too
    little memory) or does not finish is a :class:`MachineError` with its last line: the
    command was right, and a retry fails the same way until the machine changes."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", WARM_CODE],
            capture_output=True,
            text=True,
            timeout=WARM_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise MachineError(
            f"warmup: compiling the kernels did not finish in {WARM_TIMEOUT_SECONDS} s"
        ) from None
    except OSError as exc:  # no process could be started
        raise MachineError(f"warmup: cannot start {sys.executable}: {exc}") from None
    if done.returncode == 0:
        try:
            return float(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):  # it printed no seconds: told as a failure
            pass
    said = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    last = said[-1] if said else "nothing said"
    raise MachineError(
        f"warmup: compiling the kernels failed (exit {done.returncode} of {sys.executable}: "
        f"{last[:300]}); check that numba is installed for this Python and its cache "
        "directory (NUMBA_CACHE_DIR, else __pycache__ beside the package) is writable"
    )


def run_warmup(args: argparse.Namespace) -> int:
    first = kernel_seconds()
    again = kernel_seconds()
    print(f"kernels ready in {first:.1f} s (compiled or cached); from the cache: {again:.1f} s")
    return EXIT_OK
