"""A local ``neardup dedupe`` listens on loopback only (its web UI too, with ``--ui``), and the
secrets given as Spark settings (``--set``, a config file's ``spark:`` mapping) are written
nowhere: not in OUTPUT, not in the log (``-v``), not in Spark's UI."""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import signal
import socket
import time
import urllib.request
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.redaction import REDACTED
from tests.cli.test_dedupe import BASE, LOCAL, neardup, start_paused

# Secret values: one on the command line, two in a config file (one a name Spark's default
# redaction pattern misses: an Azure account key).
SET_SECRET = ("spark.hadoop.fs.s3a.secret.key", "XYZSECRET123")
FILE_SECRETS = {
    "spark.hadoop.javax.jdo.option.ConnectionPassword": "PWDVALUE444",
    "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "AZUREKEY555",
}
SECRETS = [SET_SECRET[1], *FILE_SECRETS.values()]


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
    ``pid`` and its descendants."""
    found = []
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            connections = proc.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        for c in connections:
            if c.status == psutil.CONN_LISTEN or c.type == socket.SOCK_DGRAM:
                found.append((proc.name(), c.laddr.ip, c.laddr.port))
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


@pytest.mark.slow
def test_a_local_run_listens_on_loopback_only_and_its_ui_hides_secrets(corpus, tmp_path):
    """Held after its first stage (the JVM, its Python worker daemon and the driver all up):
    every listening socket of the process tree is on loopback, the UI (--ui) among them, and
    the UI's environment page shows the secret settings redacted."""
    marker = tmp_path / "paused"
    args = ("dedupe", str(corpus / "in.parquet"), str(tmp_path / "out"), *LOCAL, "--ui")
    proc = start_paused((*args, *secret_args(corpus)), "after_sketch", marker)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), f"the run never reached its pause point (exit {proc.poll()})"
        sockets = listening(proc.pid)
        names = {name for name, _, _ in sockets}
        assert "java" in names and len(sockets) >= 4, sockets  # the JVM's RPC, blocks, UI, ...
        assert [s for s in sockets if not is_loopback(s[1])] == []
        ui = spark_ui(sorted({p for name, _, p in sockets if name == "java" and p in UI_PORTS}))
        assert ui is not None, f"no Spark UI among {sockets}"
        url, app = ui
        with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/environment") as reply:
            environment = reply.read().decode()
        assert SET_SECRET[0] in environment and "redacted" in environment
        for secret in SECRETS:
            assert secret not in environment
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


@pytest.mark.slow
def test_secrets_are_written_nowhere(corpus, tmp_path):
    """A finished run with -v: the secret values are in no file under OUTPUT (report.json,
    report.html, manifest, data) and not on stdout or stderr; the report names the settings
    with their values redacted."""
    out = tmp_path / "out"
    done = neardup(
        "-v", "dedupe", str(corpus / "in.parquet"), str(out), *LOCAL, *secret_args(corpus)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "config:" in done.stderr  # -v logs the settings
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"report.json", "report.html", "manifest.json"} <= {p.name for p in files}
    for secret in SECRETS:
        assert secret not in done.stdout and secret not in done.stderr
        for path in files:
            assert secret.encode() not in path.read_bytes(), path
    spark = json.loads((out / "report.json").read_text())["config"]["spark"]
    assert spark[SET_SECRET[0]] == REDACTED
    assert all(spark[name] == REDACTED for name in FILE_SECRETS)
