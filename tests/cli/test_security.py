"""A local ``neardup dedupe`` listens on loopback only (its web UI too, with ``--ui``, and its
Python workers' daemon: the run's per-document pass is given to Spark tasks), and the secrets
given as Spark settings (``--set``, a config file's ``spark:`` mapping) are written nowhere: not
in OUTPUT, not in the log (``-v``), not in Spark's UI."""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.redaction import REDACTED
from neardup_spark.runtime.faults import PAUSE_AT_ENV, PAUSE_MARKER_ENV
from tests.cli.test_dedupe import BASE, LOCAL, REPO
from tests.plans import ran

# Secret values: one on the command line, two in a config file (one a name Spark's default
# redaction pattern misses: an Azure account key).
SET_SECRET = ("spark.hadoop.fs.s3a.secret.key", "XYZSECRET123")
FILE_SECRETS = {
    "spark.hadoop.javax.jdo.option.ConnectionPassword": "PWDVALUE444",
    "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "AZUREKEY555",
}
SECRETS = [SET_SECRET[1], *FILE_SECRETS.values()]
# The per-document pass as Spark tasks: Python workers up when the run is held after it.
SPARK_TASKS = ("--set", "plan.sketch=spark")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("security")
    table = pa.table(
        {
            "id": ["a", "b", "c"],
            "text": [BASE, BASE.replace("word20", "other"), "unrelated text " * 10],
        }
    )
    pq.write_table(table, root / "in.parquet")
    lines = ["spark:"] + [f"  {name}: {value}" for name, value in FILE_SECRETS.items()]
    (root / "secrets.yaml").write_text("\n".join(lines) + "\n")
    return root


def secret_args(corpus: Path) -> tuple[str, ...]:
    return ("--set", "=".join(SET_SECRET), "--config", str(corpus / "secrets.yaml"))


def listening(pid: int) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every listening TCP socket and bound UDP socket of
    ``pid`` and its descendants; a process the JVM started (a Python worker or its daemon) is
    named ``worker:NAME``."""
    found = []
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            connections = proc.net_connections(kind="inet")
            name = proc.name()
            parents = {p.name() for p in proc.parents()}
        except psutil.NoSuchProcess:
            continue
        if name != "java" and "java" in parents:
            name = f"worker:{name}"
        for c in connections:
            if c.status == psutil.CONN_LISTEN or c.type == socket.SOCK_DGRAM:
                found.append((name, c.laddr.ip, c.laddr.port))
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


# Spark's UI takes port 4040 or, when taken, one of the next 16 (spark.port.maxRetries).
UI_PORTS = range(4040, 4057)


def spark_ui(ports: list[int]) -> tuple[str, str] | None:
    """(base URL, application id) of the Spark UI among ``ports`` on 127.0.0.1, if any."""
    for port in ports:
        url = f"http://127.0.0.1:{port}"
        try:
            with urllib.request.urlopen(f"{url}/api/v1/applications", timeout=10) as reply:
                apps = json.loads(reply.read())
        except (OSError, ValueError, http.client.HTTPException):
            continue
        return url, apps[0]["id"]
    return None


@dataclass
class HeldRun:
    """What the module's one run showed: while held after its first stage, and once finished."""

    sockets: list[tuple[str, str, int]]
    ui: tuple[str, str] | None
    environment: str  # the UI's environment page
    code: int
    stdout: str
    stderr: str
    out: Path


@pytest.fixture(scope="module")
def held_run(corpus, tmp_path_factory) -> HeldRun:
    """One ``neardup -v dedupe ... --ui`` with the secret settings, held after its first stage
    (the JVM, its Python worker daemon and the driver all up: the per-document pass is given
    to Spark tasks) while its sockets and its UI's environment page are read, then let go to
    finish (its stdout, stderr and OUTPUT kept)."""
    work = tmp_path_factory.mktemp("held")
    marker, out = work / "paused", work / "out"
    args = ("-v", "dedupe", str(corpus / "in.parquet"), str(out), *LOCAL, "--ui", *SPARK_TASKS)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        PAUSE_AT_ENV: "after_sketch",
        PAUSE_MARKER_ENV: str(marker),
    }
    with (work / "stdout").open("w") as stdout, (work / "stderr").open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "neardup_spark", *args, *secret_args(corpus)],
            cwd=REPO,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), f"the run never reached its pause point (exit {proc.poll()})"
        sockets = listening(proc.pid)
        ui = spark_ui(sorted({p for name, _, p in sockets if name == "java" and p in UI_PORTS}))
        environment = ""
        if ui is not None:
            url, app = ui
            with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/environment") as reply:
                environment = reply.read().decode()
        marker.unlink()  # the run goes on
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    read = lambda name: (work / name).read_text(errors="replace")  # noqa: E731
    return HeldRun(sockets, ui, environment, code, read("stdout"), read("stderr"), out)


@pytest.mark.slow
def test_a_local_run_listens_on_loopback_only_and_its_ui_hides_secrets(held_run):
    """Every listening socket of the held run's process tree is on loopback, the UI (--ui)
    among them, and the UI's environment page shows the secret settings redacted."""
    sockets = held_run.sockets
    names = {name for name, _, _ in sockets}
    assert "java" in names and len(sockets) >= 4, sockets  # the JVM's RPC, blocks, UI, ...
    assert any(name.startswith("worker:") for name in names), sockets  # the Python workers'
    ran(json.loads((held_run.out / "report.json").read_text()), sketch="spark")
    assert [s for s in sockets if not is_loopback(s[1])] == []
    assert held_run.ui is not None, f"no Spark UI among {sockets}"
    environment = held_run.environment
    assert SET_SECRET[0] in environment and "redacted" in environment
    for secret in SECRETS:
        assert secret not in environment


@pytest.mark.slow
def test_secrets_are_written_nowhere(held_run):
    """The finished run (-v): the secret values are in no file under OUTPUT (report.json,
    report.html, manifest, data) and not on stdout or stderr; the report names the settings
    with their values redacted."""
    out = held_run.out
    assert held_run.code == 0, held_run.stderr[-2000:]
    assert "config:" in held_run.stderr  # -v logs the settings
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"report.json", "report.html", "manifest.json"} <= {p.name for p in files}
    for secret in SECRETS:
        assert secret not in held_run.stdout and secret not in held_run.stderr
        for path in files:
            assert secret.encode() not in path.read_bytes(), path
    spark = json.loads((out / "report.json").read_text())["config"]["spark"]
    assert spark[SET_SECRET[0]] == REDACTED
    assert all(spark[name] == REDACTED for name in FILE_SECRETS)
