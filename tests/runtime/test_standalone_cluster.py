"""A real Spark standalone cluster on loopback, the way a user runs the job on one.

The fixture starts a master and a worker with pyspark's ``sbin/spark-daemon.sh`` (the pip
package has no ``start-master.sh``), on free ports, with logs, pid files and the worker's work
directory in a temporary directory, and always stops both. The test ships the package as a zip
with ``--py-files`` and ``spark-submit``s ``jobs/dedupe.py`` with ``conf/cluster.yaml`` to
``spark://127.0.0.1:PORT``. The driver and the executors run this virtualenv's Python with
``-S`` (no ``.pth`` files, so not the editable install of the package): they can import
``neardup_spark`` only from the shipped zip. The clusters must equal a local-mode run.

``make cluster-test`` runs this file alone; ``make test`` runs it too.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT = 120
SUBMIT_TIMEOUT = 300


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Standalone:
    master_url: str
    env: dict[str, str]
    base: Path

    @property
    def work_dir(self) -> Path:
        return self.base / "work"

    def logs(self) -> str:
        parts = []
        for log in sorted((self.base / "logs").glob("*.out")):
            parts.append(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-30:]))
        return "\n".join(parts)


def write_python_without_editable_install(path: Path) -> Path:
    """This venv's Python with ``-S``: its site-packages on PYTHONPATH, but no ``.pth`` files,
    so the editable install of neardup_spark is invisible; Spark's PYTHONPATH comes first."""
    site = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    path.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{":".join(sorted(site))}"\n'
        "export PYTHONPATH\n"
        f'exec "{sys.executable}" -S "$@"\n'
    )
    path.chmod(0o755)
    return path


def _daemon(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(spark_home() / "sbin" / "spark-daemon.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _pid(env: dict[str, str], cls: str) -> int | None:
    pid_file = Path(env["SPARK_PID_DIR"]) / f"spark-{env['SPARK_IDENT_STRING']}-{cls}-1.pid"
    try:
        return int(pid_file.read_text().strip())
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


def _stop(env: dict[str, str], cls: str) -> None:
    """``spark-daemon.sh stop`` (SIGTERM to the pid it recorded), then wait for the exit."""
    pid = _pid(env, cls)
    _daemon(env, "stop", cls, "1")
    deadline = time.monotonic() + 30
    while pid is not None and _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> Iterator[Standalone]:
    base = tmp_path_factory.mktemp("standalone")
    for name in ("logs", "pids", "conf", "work"):
        (base / name).mkdir()
    python = write_python_without_editable_install(base / "python")
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOG_DIR": str(base / "logs"),
        "SPARK_PID_DIR": str(base / "pids"),
        "SPARK_CONF_DIR": str(base / "conf"),  # empty: no site configuration leaks in
        "SPARK_IDENT_STRING": "neardup-test",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
    }
    env.pop("PYTHONPATH", None)
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    started: list[str] = []
    cluster = Standalone(master_url, env, base)
    try:
        started.append(MASTER)  # before starting: stopped even if the start half-succeeds
        _daemon(env, "start", MASTER, "1", "--host", "127.0.0.1", "--port", str(port),
                "--webui-port", str(ui_port))  # fmt: skip
        started.append(WORKER)
        _daemon(env, "start", WORKER, "1", master_url, "--host", "127.0.0.1", "--cores", "2",
                "--memory", "2g", "--webui-port", str(worker_ui),
                "--work-dir", str(cluster.work_dir))  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                state = _master_state(ui_port)
                if any(w.get("state") == "ALIVE" for w in state.get("workers", [])):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"no worker registered in {START_TIMEOUT} s\n{cluster.logs()}")
            time.sleep(1)
        yield cluster
    finally:
        for cls in reversed(started):
            _stop(env, cls)


def build_zip(dest: Path) -> Path:
    """The package as users ship it with ``--py-files``: a zip of ``neardup_spark/``."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((REPO / "neardup_spark").rglob("*.py")):
            archive.write(path, path.relative_to(REPO).as_posix())
    return dest


def partition(clusters: list[dict]) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for row in clusters:
        groups.setdefault(row["cluster_id"], set()).add(row["doc_id"])
    return {frozenset(g) for g in groups.values()}


def test_spark_submit_to_a_standalone_cluster_matches_local_mode(standalone, spark, tmp_path):
    from neardup_spark.config import build_config
    from neardup_spark.pipeline.dedupe import run
    from neardup_spark.quality.generate import generate_corpus

    corpus, _ = generate_corpus(300, seed=11, mean_words=120)
    corpus_path = tmp_path / "corpus.parquet"
    pq.write_table(corpus, corpus_path)
    package = build_zip(tmp_path / "neardup_spark.zip")

    # The premise: without the zip, the job's Python cannot import the package.
    bare = subprocess.run(
        [standalone.env["PYSPARK_PYTHON"], "-c", "import neardup_spark"],
        env=standalone.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bare.returncode != 0 and "No module named 'neardup_spark'" in bare.stderr

    out = tmp_path / "on-cluster"
    submitted = subprocess.run(
        [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            standalone.master_url,
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--driver-memory",
            "1g",
            "--total-executor-cores",
            "2",
            "--py-files",
            str(package),
            str(REPO / "jobs" / "dedupe.py"),
            str(corpus_path),
            str(out),
            "--config",
            str(REPO / "conf" / "cluster.yaml"),
            # scaled down to the 2-core, 2 GB test worker
            "--set",
            "spark.executor.cores=2",
            "--set",
            "spark.executor.memory=1g",
            "--set",
            "spark.sql.shuffle.partitions=4",
        ],
        env=standalone.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SUBMIT_TIMEOUT,
    )
    assert submitted.returncode == 0, submitted.stderr[-4000:] + "\n" + standalone.logs()
    report = json.loads((out / "report.json").read_text())
    assert report["spark"]["master"] == standalone.master_url
    assert report["config"]["arrow_batch_size"] == 5000  # conf/cluster.yaml was applied
    assert report["counts"]["input_rows"] == 300
    # The worker launched an executor for the application (its logs are in the work dir).
    assert list(standalone.work_dir.glob("app-*/*/stderr")), standalone.logs()

    local_out = tmp_path / "local"
    local_report = run(spark, str(corpus_path), str(local_out), build_config())
    on_cluster = ds.dataset(str(out / "clusters")).to_table().to_pylist()
    local = ds.dataset(str(local_out / "clusters")).to_table().to_pylist()
    assert len(on_cluster) == len(local) == 300
    assert partition(on_cluster) == partition(local)
    assert {r["doc_id"]: r["cluster_id"] for r in on_cluster} == {
        r["doc_id"]: r["cluster_id"] for r in local
    }
    assert report["counts"]["clusters"] == local_report["counts"]["clusters"] < 300
    assert report["counts"]["near_pairs"] == local_report["counts"]["near_pairs"]
