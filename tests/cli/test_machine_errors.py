"""What a retry cannot get past and the command did not cause ends in exit 3, "fix the
machine", in one line: Spark's Python package missing, a Spark older than 3.5, kernels that
do not compile in ``neardup warmup``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from neardup_spark.errors import EXIT_MACHINE_ERROR, MachineError
from neardup_spark.runtime.spark_compat import check_spark_version

REPO = Path(__file__).resolve().parents[2]


def python(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def one_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_without_pyspark_the_machine_is_at_fault():
    # -S: no site-packages (no pyspark); the package itself from the repository
    done = python("-S", "-m", "neardup_spark", "dedupe", "in", "out", env={"PYTHONPATH": str(REPO)})
    assert "pip install 'neardup-spark[spark]'" in one_error(done, EXIT_MACHINE_ERROR)


def test_a_spark_older_than_3_5_is_refused_as_the_machine():
    with pytest.raises(MachineError, match=r"Spark 3\.4\.1 is not supported"):
        check_spark_version(SimpleNamespace(version="3.4.1"))  # type: ignore[arg-type]
    check_spark_version(SimpleNamespace(version="3.5.0"))  # type: ignore[arg-type]


def test_warmup_whose_kernels_do_not_compile_is_exit_3():
    # The real command in a process of its own; its compiling child fails as a broken numba
    # or LLVM would (the child's code replaced, nothing else).
    failing = "import sys; print('compiling', file=sys.stderr); sys.exit('LLVM ERROR: no memory')"
    starter = (
        "import sys; import neardup_spark.cli.warmup as w; "
        f"w.WARM_CODE = {failing!r}; "
        "from neardup_spark.cli import command; sys.argv = ['neardup', 'warmup']; command()"
    )
    line = one_error(python("-c", starter), EXIT_MACHINE_ERROR)
    assert "compiling the kernels failed (exit 1" in line and "LLVM ERROR: no memory" in line
