"""A Spark standalone cluster on loopback: a master and workers started with pyspark's
``sbin/spark-daemon.sh`` (the pip package has no ``start-master.sh``), on free ports, with
logs, pid files and the workers' work directories under one directory, always stopped on exit.

The bench's ``neardup-standalone`` row runs the job on two one-core workers this way, and
``tests/runtime/test_standalone_cluster.py`` (``make cluster-test``) spark-submits to one.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT = 120
STOP_TIMEOUT = 30


class ClusterError(RuntimeError):
    """The cluster did not come up (its logs are in the message)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Standalone:
    """A running cluster: its master URL, the environment its daemons run with (also right for
    ``spark-submit`` to it) and its directory."""

    master_url: str
    env: dict[str, str]
    base: Path

    @property
    def work_dir(self) -> Path:
        return self.base / "work"

    def pids(self) -> list[int]:
        """The daemons' process ids (master and workers; executors are the workers'
        children)."""
        found = []
        for path in sorted(Path(self.env["SPARK_PID_DIR"]).glob("*.pid")):
            with contextlib.suppress(OSError, ValueError):
                found.append(int(path.read_text().strip()))
        return found

    def logs(self) -> str:
        parts = []
        for log in sorted((self.base / "logs").glob("*.out")):
            parts.append(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-30:]))
        return "\n".join(parts)


def _daemon(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(spark_home() / "sbin" / "spark-daemon.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _pid(env: dict[str, str], cls: str, instance: int) -> int | None:
    name = f"spark-{env['SPARK_IDENT_STRING']}-{cls}-{instance}.pid"
    try:
        return int((Path(env["SPARK_PID_DIR"]) / name).read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(env: dict[str, str], cls: str, instance: int) -> None:
    """``spark-daemon.sh stop`` (SIGTERM to the pid it recorded), then wait for the exit."""
    pid = _pid(env, cls, instance)
    _daemon(env, "stop", cls, str(instance))
    deadline = time.monotonic() + STOP_TIMEOUT
    while pid is not None and _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)


def _master_state(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
        return dict(json.loads(response.read()))


@contextlib.contextmanager
def standalone_cluster(
    base: Path,
    workers: int = 2,
    cores: int = 1,
    memory: str = "2g",
    python: str | None = None,
) -> Iterator[Standalone]:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each on 127.0.0.1,
    with ``python`` (default: ``PYSPARK_PYTHON`` or this interpreter) for the Python workers;
    yields once all workers registered, stops them all on exit. Raises :class:`ClusterError`
    when they do not come up within :data:`START_TIMEOUT` seconds."""
    import sys

    for name in ("logs", "pids", "conf", "work"):
        (base / name).mkdir(parents=True, exist_ok=True)
    python = python or os.environ.get("PYSPARK_PYTHON") or sys.executable
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOG_DIR": str(base / "logs"),
        "SPARK_PID_DIR": str(base / "pids"),
        "SPARK_CONF_DIR": str(base / "conf"),  # empty: no site configuration leaks in
        "SPARK_IDENT_STRING": "neardup",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
    }
    env.pop("PYTHONPATH", None)
    port, ui_port = free_port(), free_port()
    cluster = Standalone(f"spark://127.0.0.1:{port}", env, base)
    started: list[tuple[str, int]] = []
    try:
        started.append((MASTER, 1))  # before starting: stopped even if the start half-succeeds
        _daemon(env, "start", MASTER, "1", "--host", "127.0.0.1", "--port", str(port),
                "--webui-port", str(ui_port))  # fmt: skip
        for instance in range(1, workers + 1):
            started.append((WORKER, instance))
            _daemon(env, "start", WORKER, str(instance), cluster.master_url, "--host",
                    "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port",
                    str(free_port()), "--work-dir", str(cluster.work_dir))  # fmt: skip
        _wait_for_workers(ui_port, workers, cluster)
        yield cluster
    finally:
        for cls, instance in reversed(started):
            _stop(env, cls, instance)


def _wait_for_workers(ui_port: int, workers: int, cluster: Standalone) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        with contextlib.suppress(OSError, ValueError):
            state = _master_state(ui_port)
            alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
            if len(alive) >= workers:
                return
        if time.monotonic() > deadline:
            raise ClusterError(f"{workers} worker(s) not registered in {START_TIMEOUT} s\n"
                               + cluster.logs())  # fmt: skip
        time.sleep(1)
