"""A real Spark standalone cluster on loopback, the way a user runs the job on one.

The fixture starts a master and two workers of one core each with pyspark's
``sbin/spark-daemon.sh`` (neardup_spark/bench/standalone.py), on free ports, with logs, pid
files and the workers' work directories in a temporary directory, and always stops them. The
test ships the package as a zip
with ``--py-files`` and ``spark-submit``s ``jobs/dedupe.py`` with ``conf/cluster.yaml`` to
``spark://127.0.0.1:PORT``. The driver and the executors run this virtualenv's Python with
``-S`` (no ``.pth`` files, so not the editable install of the package): they can import
``neardup_spark`` only from the shipped zip. The clusters and pairs must equal a local-mode
run's (``local[2]``): on the cluster every step in Spark (the per-document pass in the
executors' tasks, the pairs as Spark stages, the components in distributed large-star/small-star
rounds), in local mode every step on the driver; each run's recorded plan says so.

It is also the suite's test of ``spark-submit jobs/dedupe.py`` as such: spark-submit's master
wins over the job's own ``--master``.

``make cluster-test`` runs this file alone; ``make test`` runs it too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.bench.standalone import ClusterError, Standalone, spark_home, standalone_cluster
from tests.conftest import SUITE_JVM_OPTIONS
from tests.plans import placed, ran

pytestmark = [pytest.mark.slow, pytest.mark.extended]  # (make cluster-test; CI: make test-extended)

REPO = Path(__file__).resolve().parents[2]
SUBMIT_TIMEOUT = 420


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


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> Iterator[Standalone]:
    """A master and two workers of one core each (neardup_spark/bench/standalone.py)."""
    base = tmp_path_factory.mktemp("standalone")
    python = write_python_without_editable_install(base / "python")
    try:
        with standalone_cluster(base, workers=2, cores=1, memory="1g", python=str(python)) as c:
            yield c
    except ClusterError as exc:
        pytest.fail(str(exc))


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
            "--conf",  # the quick JIT and the class archive, as every JVM of the suite
            f"spark.executor.extraJavaOptions={SUITE_JVM_OPTIONS}",  # (tests/conftest.py)
            "--driver-memory",
            "1g",
            "--total-executor-cores",
            "2",
            "--executor-cores",
            "1",
            "--py-files",
            str(package),
            str(REPO / "jobs" / "dedupe.py"),
            str(corpus_path),
            str(out),
            "--config",
            str(REPO / "conf" / "cluster.yaml"),
            # scaled down to the two 1-core, 1 GB test workers
            "--set",
            "spark.executor.cores=1",
            "--set",
            "spark.executor.memory=768m",
            "--set",
            "spark.executor.memoryOverhead=256m",
            "--set",  # the Spark path on the cluster (the pass runs there anyway)
            "plan.pairs=spark",
            "--set",
            "plan.components=distributed",
            "--set",
            "spark.sql.shuffle.partitions=4",
            # spark-submit's master wins over the job's own --master (the job-entry check of
            # a local spark-submit, once a test of its own: one spark-submit serves both)
            "--master",
            "local[1]",
        ],
        env=standalone.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SUBMIT_TIMEOUT,
    )
    assert submitted.returncode == 0, submitted.stderr[-4000:] + "\n" + standalone.logs()
    report = json.loads((out / "report.json").read_text())
    assert report["spark"]["master"] == standalone.master_url  # not the job's local[1]
    assert report["config"]["arrow_batch_size"] == 5000  # conf/cluster.yaml was applied
    assert report["counts"]["input_rows"] == 300
    # The worker launched an executor for the application (its logs are in the work dir).
    assert list(standalone.work_dir.glob("app-*/*/stderr")), standalone.logs()

    local_out = tmp_path / "local"
    local_report = run(
        spark, str(corpus_path), str(local_out), build_config(),
        execution=placed(sketch="driver", pairs="driver", components="driver"),
    )  # fmt: skip
    on_cluster = ds.dataset(str(out / "clusters")).to_table().to_pylist()
    local = ds.dataset(str(local_out / "clusters")).to_table().to_pylist()
    assert len(on_cluster) == len(local) == 300
    assert partition(on_cluster) == partition(local)
    assert {r["doc_id"]: r["cluster_id"] for r in on_cluster} == {
        r["doc_id"]: r["cluster_id"] for r in local
    }
    assert report["counts"]["clusters"] == local_report["counts"]["clusters"] < 300
    assert report["counts"]["near_pairs"] == local_report["counts"]["near_pairs"]
    assert report["components"]["strategy"] == "distributed"
    assert local_report["components"]["strategy"] == "driver"
    ran(report, sketch="spark", pairs="spark", components="distributed")
    assert "other machines" in report["plan"]["sketch"]["why"]  # not given: the only choice
    ran(local_report, sketch="driver", pairs="driver", components="driver")
    assert pairs_of(out) == pairs_of(local_out) and pairs_of(out)
    # Both workers ran executors of the application.
    assert len({p.parent for p in standalone.work_dir.glob("app-*/*/stderr")}) == 2


def pairs_of(out: Path) -> list[tuple]:
    rows = ds.dataset(str(out / "pairs")).to_table().to_pylist()
    return sorted((r["doc_a"], r["doc_b"], r["method"], r["jaccard"]) for r in rows)
