"""A Spark Connect server on loopback, in a process of its own: a classic local session started
with Spark's Connect plugin (``org.apache.spark.sql.connect.SparkConnectPlugin``, whose jar the
pip ``pyspark`` 4.x wheel ships), serving ``sc://127.0.0.1:PORT`` until its stdin closes.

The bench's ``neardup-connect`` row, ``make test``'s Connect tests and ``make test-compat``'s
Connect row run the job from a client process against one. ``python -m
neardup_spark.bench.connect_server --port 15002`` starts one by hand.

``plain=True`` gives the server what a managed service gives it (Databricks serverless cannot
be told otherwise): Spark's own Python worker daemon, none of the local mode's settings of
:mod:`neardup_spark.runtime.session`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from neardup_spark.bench.standalone import free_port

CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
READY = "neardup-connect-server ready"
START_TIMEOUT = 180.0


@dataclass
class ConnectServer:
    """A running server: its URL and process."""

    url: str
    process: subprocess.Popen[str]
    log: Path

    def logs(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])


def server_settings(port: int, plain: bool) -> dict[str, str]:
    """The Spark settings of the server's session (besides the CLI's local defaults)."""
    settings = {
        "spark.plugins": CONNECT_PLUGIN,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
    }
    if plain:  # Spark's own worker daemon, as a managed service's
        settings["spark.python.daemon.module"] = "pyspark.daemon"
    return settings


@contextlib.contextmanager
def connect_server(
    workdir: Path,
    master: str = "local[2]",
    python: str | None = None,
    plain: bool = False,
    extra_env: dict[str, str] | None = None,
    spark: dict[str, str] | None = None,
) -> Iterator[ConnectServer]:
    """Start a server (``python``: the interpreter that runs it and its workers, which must
    have pyspark 4 and this package; ``spark``: more settings of its session), yield it once it
    serves, stop it on exit."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"connect-server-{port}.log"
    python = python or sys.executable
    env = {**os.environ, "PYSPARK_PYTHON": python, **(extra_env or {})}
    args = [python, "-m", "neardup_spark.bench.connect_server", "--port", str(port)]
    args += ["--master", master, *(["--plain"] if plain else [])]
    for key, value in (spark or {}).items():
        args += ["--set", f"{key}={value}"]
    with log.open("w") as out:
        process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
            env=env,
            start_new_session=True,
        )
    server = ConnectServer(f"sc://127.0.0.1:{port}", process, log)
    try:
        _wait_ready(server)
        yield server
    finally:
        _stop(process)


def _wait_ready(server: ConnectServer) -> None:
    assert server.process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"the Connect server exited:\n{server.logs()}")
        ready, _, _ = select.select([server.process.stdout], [], [], 1.0)
        if ready and READY in server.process.stdout.readline():
            return
    raise RuntimeError(f"the Connect server did not start in {START_TIMEOUT:.0f} s")


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()  # the server stops its session and exits
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def serve(port: int, master: str, plain: bool, extra: dict[str, str] | None = None) -> None:
    """Run a server in this process until stdin closes (or SIGTERM)."""
    from neardup_spark.config import SessionSettings
    from neardup_spark.runtime.session import build_session

    os.environ.pop("SPARK_REMOTE", None)  # this process is the server, not a client
    settings = SessionSettings(
        master=master, spark={**server_settings(port, plain), **(extra or {})}
    )
    spark = build_session(settings, app_name="neardup-connect-server")
    print(f"{READY} sc://127.0.0.1:{port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.stdin.close())
    with contextlib.suppress(ValueError, OSError):
        while sys.stdin.read(4096):
            pass
    spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=15002)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--plain", action="store_true", help="Spark's own worker daemon")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.set)
    serve(args.port, args.master, args.plain, extra)


if __name__ == "__main__":
    main()
