"""``neardup warmup``: compile the kernels into numba's on-disk cache now, so that the first run
does not (an install step: ``make setup`` runs it; on a cluster, run it where the executors'
Python and package live, e.g. while building their image)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

from neardup_spark.errors import EXIT_OK

# A fresh interpreter: numba must not be imported before the CPU features are chosen.
_WARM = "from neardup_spark.runtime.worker_daemon import warm_kernels; print(warm_kernels())"


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "warmup",
        help="compile the kernels into numba's cache now (an install step), not in the first run",
    )
    parser.set_defaults(func=run_warmup)


def kernel_seconds() -> float:
    """Seconds a fresh process takes to have every kernel ready (compiled, or loaded)."""
    done = subprocess.run(
        [sys.executable, "-c", _WARM], capture_output=True, text=True, timeout=1800, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def run_warmup(args: argparse.Namespace) -> int:
    first = kernel_seconds()
    again = kernel_seconds()
    print(f"kernels ready in {first:.1f} s (compiled or cached); from the cache: {again:.1f} s")
    return EXIT_OK
