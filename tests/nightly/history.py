"""The nightly tests' history: a generated corpus plus crafted pages over three days (a bridge
between two old clusters, exact copies, re-crawls), the run that gets killed, and helpers."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from neardup_spark.config import DedupeConfig, build_config
from neardup_spark.nightly.docs import latest_rows
from neardup_spark.nightly.store import Index
from neardup_spark.runtime.faults import PAUSE_AT_ENV, PAUSE_MARKER_ENV
from tests.plans import placed

REPO = Path(__file__).resolve().parents[2]


BUCKETS = 4
# The nights of these tests keep the components rule (merges, splits, stable ids); the anchored
# rule's nights are tests/nightly/test_anchored_nights.py's.
COMPONENTS = {"cluster_rule": "components"}


def config_of(options: dict | None = None, overrides: list[str] | None = None) -> DedupeConfig:
    """The config of these nights: the components rule, and ``options``/``overrides``."""
    return build_config(overrides=overrides, options={**COMPONENTS, **(options or {})})


def read(path: Path | str) -> pa.Table:
    return ds.dataset(str(path)).to_table()


def assignment(path: Path | str) -> dict[str, str]:
    table = read(path)
    return dict(
        zip(table.column("doc_id").to_pylist(), table.column("cluster_id").to_pylist(), strict=True)
    )


def index_assignment(spark, index_dir: Path) -> dict[str, str]:
    rows = Index.open(spark, str(index_dir)).docs_rows()
    assert rows is not None
    docs = latest_rows(rows)
    return {r["doc_id"]: r["cluster_id"] for r in docs.collect()}


def canonical(table: pa.Table) -> pa.Table:
    """Rows sorted; the schema without nullability flags or metadata (which say how a file was
    written, not what it holds)."""
    schema = pa.schema([field.with_nullable(True) for field in table.schema])
    return table.cast(schema).sort_by([(name, "ascending") for name in table.column_names])


def partition(of: dict[str, str]) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for doc, cluster in of.items():
        groups.setdefault(cluster, set()).add(doc)
    return {frozenset(g) for g in groups.values()}


def tree_state(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root`` with its size, modification time and SHA-256 (what
    "unchanged" means for a directory: a same-size rewrite is a change)."""
    return {
        str(p.relative_to(root)): (
            p.stat().st_size,
            p.stat().st_mtime_ns,
            hashlib.sha256(p.read_bytes()).hexdigest(),
        )
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


WORDS = [f"w{i}" for i in range(400)]


def text(lo: int, hi: int, swap: int | None = None) -> str:
    words = WORDS[lo:hi]
    if swap is not None:
        words[swap] = "changed"
    return " ".join(words)


# J(a, c) = J(b, c) = 0.87 (5-shingles), J(a, b) = 0.76 < 0.8: only the bridge c joins them.
CRAFTED_DAY1 = [
    ("a", text(0, 150)),
    ("b", text(20, 170)),
    ("p1", text(200, 260)),
    ("p2", text(200, 260)),  # an exact copy of p1
    ("x", text(300, 360)),
    ("e", ""),
    ("z", None),
]


CRAFTED_DAY2 = [
    ("c", text(10, 160)),  # the bridge
    ("0", text(0, 150, swap=75)),  # near-duplicate of a, with a smaller id than a
    ("q", text(200, 260)),  # another exact copy of p1
    ("n", text(340, 400)),  # new and unlike anything
]


DAY3 = [
    ("c", text(100, 101) + " " + text(361, 400)),  # re-crawled: now unlike a and b
    ("p2", text(200, 260)),  # re-crawled, unchanged
]


CRAFTED = {d for d, _ in CRAFTED_DAY1 + CRAFTED_DAY2}


def rows_table(rows: list[tuple[str, str | None]]) -> pa.Table:
    return pa.table(
        {"id": [r[0] for r in rows], "text": pa.array([r[1] for r in rows], pa.string())}
    )


KILL_TEST = "test_killed_run_leaves_the_index_and_outputs_intact"


# A night on the driver: its per-document pass in this process's threads, its own steps here,
# the index's docs and pairs rows read by PyArrow scans here (what a batch this small gets by
# default, given here so that no threshold decides).
DRIVER_PATH = placed(sketch="driver", night="driver", docs_scan="driver", pairs_scan="driver")
# Every step of a night in Spark jobs: Spark's per-document pass (which stashes the texts the
# Spark steps verify with), the night's steps as Spark jobs; its stable ids where the plan
# decides (on the driver, for graphs this small).
SPARK_PATH = placed(sketch="spark", night="spark")
# ... and the stable ids in Spark: the Spark twin of the stable-id rule, the graph's components
# in one task (SPARK_IDS) or in distributed rounds (DISTRIBUTED).
SPARK_IDS = placed(**SPARK_PATH.plan, night_components="spark")
DISTRIBUTED = dataclasses.replace(SPARK_IDS, components_single_task_max_edges=0)
# A night on the driver that reads the index's docs and pairs rows with Spark jobs.
SPARK_SCANS = placed(sketch="driver", night="driver", docs_scan="spark", pairs_scan="spark")


# The run to kill: its own process and JVM. It starts early (the JVM starts while days 1 and 2
# run here), reads its input once to warm up, then waits for the go file.
KILLED_RUN = """
import sys, time
from pathlib import Path
from pyspark.sql import SparkSession
from neardup_spark.config import build_config
COMPONENTS = {"cluster_rule": "components"}
from neardup_spark.nightly.run import run_incremental
from neardup_spark.io.corpus import read_corpus
batch, out, index, go = sys.argv[1:5]
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "4")
    .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    .getOrCreate()
)
read_corpus(spark, batch)
while not Path(go).exists():
    time.sleep(0.05)
run_incremental(spark, batch, out, index, build_config(options=COMPONENTS), overwrite=True)
"""


class KilledRun:
    """Day 3 in a process of its own, SIGKILLed once it wrote its segment and results, before it
    commits (held there by the ``before_index_commit`` pause point)."""

    def __init__(self, root: Path, batch: Path, out: Path, index: Path) -> None:
        self.root, self.out, self.index = root, out, index
        self.go = root / "go"
        self.log = root / "killed-run.log"
        with open(self.log, "wb") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", KILLED_RUN, str(batch), str(out), str(index), str(self.go)],
                cwd=REPO,
                env={
                    **os.environ,
                    "PYSPARK_PYTHON": sys.executable,
                    PAUSE_AT_ENV: "before_index_commit",
                    PAUSE_MARKER_ENV: str(root / "paused"),
                },
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill_midway(self) -> dict:
        """Let it run, kill it (its whole process group) mid-write; what it left behind."""
        before = {"index": tree_state(self.index), "out": tree_state(self.out)}
        marker, killed_while_paused = None, False
        try:
            self.go.touch()
            deadline = time.monotonic() + 300
            paused = self.root / "paused"
            while not paused.exists() and time.monotonic() < deadline and self.proc.poll() is None:
                time.sleep(0.05)
            marker = next((self.index / "segments").glob("s000003-*/docs"), None)
            killed_while_paused = paused.exists() and self.proc.poll() is None
            if killed_while_paused:
                os.killpg(self.proc.pid, signal.SIGKILL)  # Python, JVM and Python workers
        finally:
            self.stop()
        assert marker is not None, self.log.read_text(errors="replace")[-3000:]
        return {
            "marker": marker.relative_to(self.index).as_posix(),
            "returncode": self.proc.returncode,
            "killed_while_paused": killed_while_paused,
            "before": before,
            "after": {"index": tree_state(self.index), "out": tree_state(self.out)},
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)


def after(spark, history, day: str) -> dict[str, str]:
    return index_assignment(spark, history["root"] / f"index-after-{day}")
