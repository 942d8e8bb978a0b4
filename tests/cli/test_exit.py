"""The ``neardup`` script ends its process without the interpreter's teardown
(:func:`neardup_spark.cli.exit_quickly`), doing first what an exit does that matters."""

from __future__ import annotations

import subprocess
import sys

EXITS = """
import atexit, sys, threading, time
from pathlib import Path
from neardup_spark.cli import exit_quickly
out = Path(sys.argv[1])

def late_writer():
    time.sleep(0.3)
    (out / "thread").write_text("joined")

atexit.register(lambda: (out / "atexit").write_text("ran"))
threading.Thread(target=late_writer).start()
print("printed, still in the buffer")  # a pipe: block-buffered
sys.stderr.write("said on stderr")
exit_quickly(3)
"""


def test_an_exit_waits_for_threads_runs_atexit_and_flushes_the_output(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", EXITS, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3
    assert done.stdout == "printed, still in the buffer\n"
    assert done.stderr == "said on stderr"
    assert (tmp_path / "thread").read_text() == "joined"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_the_module_runs_as_the_command_with_its_exit_code():
    done = subprocess.run(
        [sys.executable, "-m", "neardup_spark", "dedupe", "--no-such-option"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "unrecognized arguments: --no-such-option" in done.stderr
