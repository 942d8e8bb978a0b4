"""Incremental runs against a persistent index (``neardup_spark.nightly.run``), on real Spark.

One small history is shared by the tests (each run costs seconds of Spark jobs): a generated
corpus cut in two days, plus hand-made documents where a day-2 page bridges two day-1 clusters
(merge, stable ids, ``changed_clusters``); day 3 re-crawls pages, which splits them again. Day 1
then day 2 incrementally is compared with one full run over both (equivalence); batches are
re-run (idempotency), and a run is killed mid-write (crash).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.kernels.arrow_buffers import sorted_sets
from neardup_spark.nightly.compaction import compact_index
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.stable_ids import cluster_members
from neardup_spark.nightly.store import CURRENT_FILE, Index
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus

REPO = Path(__file__).resolve().parents[2]
BUCKETS = 4


def read(path: Path | str) -> pa.Table:
    return ds.dataset(str(path)).to_table()


def assignment(path: Path | str) -> dict[str, str]:
    table = read(path)
    return dict(
        zip(table.column("doc_id").to_pylist(), table.column("cluster_id").to_pylist(), strict=True)
    )


def index_assignment(spark, index_dir: Path) -> dict[str, str]:
    docs = Index.open(spark, str(index_dir)).docs()
    assert docs is not None
    return {r["doc_id"]: r["cluster_id"] for r in docs.collect()}


def canonical(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


def partition(of: dict[str, str]) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for doc, cluster in of.items():
        groups.setdefault(cluster, set()).add(doc)
    return {frozenset(g) for g in groups.values()}


def tree_state(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size (what "unchanged" means for a directory)."""
    return {
        str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()
    }


# --------------------------------------------------------------------------------------------
# The history

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
DISTRIBUTED = {"components_single_task_max_edges": 0}

# The run to kill: its own process and JVM. It starts early (the JVM starts while days 1 and 2
# run here), reads its input once to warm up, then waits for the go file.
KILLED_RUN = """
import sys, time
from pathlib import Path
from pyspark.sql import SparkSession
from neardup_spark.config import build_config
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
run_incremental(spark, batch, out, index, build_config(), overwrite=True)
"""


class KilledRun:
    """Day 3 in a process of its own, SIGKILLed while it writes the new index version: when its
    new segment appears on disk, it still has to write the bands, the pairs, the batch results
    and the documents, and to commit."""

    def __init__(self, root: Path, batch: Path, out: Path, index: Path) -> None:
        self.root, self.out, self.index = root, out, index
        self.go = root / "go"
        self.log = root / "killed-run.log"
        with open(self.log, "wb") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", KILLED_RUN, str(batch), str(out), str(index), str(self.go)],
                cwd=REPO,
                env={**os.environ, "PYSPARK_PYTHON": sys.executable},
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill_midway(self) -> dict:
        """Let it run, kill it (its whole process group) mid-write; what it left behind."""
        before = {"index": tree_state(self.index), "out": tree_state(self.out)}
        marker = None
        try:
            self.go.touch()
            deadline = time.monotonic() + 300
            while marker is None and time.monotonic() < deadline and self.proc.poll() is None:
                marker = next((self.index / "contents").glob("seg=s000003-*"), None)
                time.sleep(0.02)
            if marker is not None:
                os.killpg(self.proc.pid, signal.SIGKILL)  # Python, JVM and Python workers
        finally:
            self.stop()
        assert marker is not None, self.log.read_text(errors="replace")[-3000:]
        return {
            "marker": marker.relative_to(self.index).as_posix(),
            "returncode": self.proc.returncode,
            "before": before,
            "after": {"index": tree_state(self.index), "out": tree_state(self.out)},
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory, request):
    root = tmp_path_factory.mktemp("history")
    generated, _ = generate_corpus(420, seed=5, mean_words=60)
    day1 = pa.concat_tables([generated.slice(0, 280), rows_table(CRAFTED_DAY1)])
    day2 = pa.concat_tables([generated.slice(280), rows_table(CRAFTED_DAY2)])
    parts = {
        "day1": day1,
        "day2": day2,
        "all": pa.concat_tables([day1, day2]),
        "day3": rows_table(DAY3),
    }
    for name, part in parts.items():
        (root / name).mkdir()
        pq.write_table(part, root / name / "part-0.parquet")
    config = build_config()
    index = root / "index"
    killed = None
    if any(item.originalname == KILL_TEST for item in request.session.items):
        killed = KilledRun(root, root / "day3", root / "out-day3", index)
    try:
        reports, crash = {}, None
        for day in ("day1", "day2", "day3"):
            if day == "day3" and killed is not None:
                # The killed run would replace a finished output: day 2's, copied there.
                shutil.copytree(root / "out-day2", root / "out-day3")
                crash = killed.kill_midway()
                crash["assignment"] = index_assignment(spark, index)
            reports[day] = run_incremental(
                spark,
                str(root / day),
                str(root / f"out-{day}"),
                str(index),
                # Day 3 clusters with distributed Spark jobs instead of on the driver.
                config if day != "day3" else build_config(options=DISTRIBUTED),
                overwrite=crash is not None,
                buckets=BUCKETS,
            )
            shutil.copytree(index, root / f"index-after-{day}")
    finally:
        if killed is not None:
            killed.stop()
    full = run(spark, str(root / "all"), str(root / "full"), config)
    return {
        "root": root,
        "index": index,
        "reports": reports,
        "full": full,
        "tables": parts,
        "crash": crash,
    }


def after(spark, history, day: str) -> dict[str, str]:
    return index_assignment(spark, history["root"] / f"index-after-{day}")


def test_incremental_equals_one_full_run(spark, history):
    root = history["root"]
    full = assignment(root / "full" / "clusters")
    final = after(spark, history, "day2")
    assert partition(final) == partition(full)
    # Ids: the generated day-2 ids are all larger than day 1's, so there the stable ids are the
    # full run's; the crafted document 0 shows where they differ (see the next test).
    assert {d: c for d, c in final.items() if d not in CRAFTED} == {
        d: c for d, c in full.items() if d not in CRAFTED
    }
    published = assignment(root / "out-day2" / "clusters")
    assert published == {d: final[d] for d in history["tables"]["day2"].column("id").to_pylist()}
    assert history["reports"]["day2"]["components"]["strategy"] == "driver"
    counts = history["reports"]["day2"]["counts"]
    assert counts["input_rows"] == 144 and counts["joined_existing"] > 3
    assert counts["near_pairs"] > 0 and counts["exact_copies"] > 1


def test_bridge_merges_two_old_clusters_with_stable_ids(spark, history):
    root = history["root"]
    after1, after2 = after(spark, history, "day1"), after(spark, history, "day2")
    crafted1 = {d: c for d, c in after1.items() if d in CRAFTED}
    assert crafted1 == {"a": "a", "b": "b", "p1": "p1", "p2": "p1", "x": "x", "e": "e", "z": "z"}
    # c joins a's and b's clusters: they merge under the smaller id, a. Document 0 joins too and
    # the cluster keeps its id although 0 < a (stable ids); q joins p1's cluster.
    assert {d for d, c in after2.items() if c == "a"} == {"a", "b", "c", "0"}
    assert {d for d, c in after2.items() if c == "p1"} == {"p1", "p2", "q"}
    assert after2["n"] == "n" and after2["x"] == "x"
    published = assignment(root / "out-day2" / "clusters")
    assert {d: published[d] for d in ("c", "0", "q", "n")} == {
        "c": "a",
        "0": "a",
        "q": "p1",
        "n": "n",
    }
    kept = set(read(root / "out-day2" / "deduplicated").column("id").to_pylist())
    assert kept & CRAFTED == {"n"}
    pairs = read(root / "out-day2" / "pairs")
    found = set(
        zip(
            pairs["doc_a"].to_pylist(),
            pairs["doc_b"].to_pylist(),
            pairs["method"].to_pylist(),
            strict=True,
        )
    )
    assert {("a", "c", "minhash"), ("b", "c", "minhash"), ("0", "a", "minhash")} <= found
    assert ("p1", "q", "exact") in found
    assert ("a", "b", "minhash") not in found


def test_changed_clusters_lists_merges_and_splits(spark, history):
    root = history["root"]
    assert read(root / "out-day1" / "changed_clusters").num_rows == 0
    states = {day: after(spark, history, day) for day in ("day1", "day2", "day3")}
    for day, previous in (("day2", "day1"), ("day3", "day2")):
        batch_ids = set(history["tables"][day].column("id").to_pylist())
        rows = read(root / f"out-{day}" / "changed_clusters").to_pylist()
        got = {(r["old_cluster_id"], r["new_cluster_id"]) for r in rows}
        assert len(got) == len(rows)
        # One row per (old id, new id) of an indexed document the batch did not replace.
        expected = {
            (states[previous][d], states[day][d])
            for d in states[previous]
            if d not in batch_ids and states[previous][d] != states[day][d]
        }
        assert got == expected, day
        assert history["reports"][day]["counts"]["changed_clusters"] == len(expected)
    # Day 2: b's cluster merged into a's. Day 3: c re-crawled with other text, so b (joined to
    # a only through c) leaves cluster a and is its own cluster again.
    assert ("b", "a") in {
        (r["old_cluster_id"], r["new_cluster_id"])
        for r in read(root / "out-day2" / "changed_clusters").to_pylist()
    }
    assert read(root / "out-day3" / "changed_clusters").to_pylist() == [
        {"old_cluster_id": "a", "new_cluster_id": "b"}
    ]


def test_recrawled_pages_replace_their_documents(spark, history):
    root = history["root"]
    report = history["reports"]["day3"]
    assert report["components"]["strategy"] == "distributed"  # the Spark twin of the driver path
    counts = report["counts"]
    assert counts["replaced"] == 2 and counts["replaced_unchanged"] == 1
    after2, after3 = after(spark, history, "day2"), after(spark, history, "day3")
    assert set(after3) == set(after2)  # replaced, not added
    assert {d for d, c in after3.items() if c == "a"} == {"a", "0"}
    assert after3["b"] == "b" and after3["c"] == "c" and after3["p2"] == "p1"
    # The changed page is new content: kept; the unchanged one was seen before: not kept.
    assert set(read(root / "out-day3" / "deduplicated").column("id").to_pylist()) == {"c"}
    # The generated documents are untouched; the crafted ones are partitioned as an independent
    # brute force over their current texts finds them (Jaccard of word 5-shingle sets >= 0.8).
    assert {d: c for d, c in after3.items() if d not in CRAFTED} == {
        d: c for d, c in after2.items() if d not in CRAFTED
    }
    current = dict(CRAFTED_DAY1) | dict(CRAFTED_DAY2) | dict(DAY3)
    crafted3 = {d: c for d, c in after3.items() if d in CRAFTED}
    assert partition(crafted3) == brute_force_partition(current)


def shingles(value: str | None, k: int = 5) -> set[tuple[str, ...]]:
    words = (value or "").split()
    if len(words) < k:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def brute_force_partition(texts: dict[str, str | None]) -> set[frozenset[str]]:
    """Connected components of the pairs whose exact Jaccard reaches 0.8 (exact copies too)."""
    parent = {d: d for d in texts}

    def root(d: str) -> str:
        while parent[d] != d:
            d = parent[d]
        return d

    sets = {d: shingles(t) for d, t in texts.items()}
    for a in texts:
        for b in texts:
            near = sets[a] and sets[b] and len(sets[a] & sets[b]) / len(sets[a] | sets[b]) >= 0.8
            if a < b and near:
                parent[root(b)] = root(a)
    groups: dict[str, set[str]] = {}
    for d in texts:
        groups.setdefault(root(d), set()).add(d)
    return {frozenset(g) for g in groups.values()}


def test_output_contract_of_a_batch(spark, history):
    root, report = history["root"], history["reports"]["day2"]
    out = root / "out-day2"
    for name in ("clusters", "pairs", "changed_clusters", "deduplicated"):
        assert (out / name).is_dir(), name
    for name in ("report.json", "manifest.json", "_SUCCESS"):
        assert (out / name).is_file(), name
    assert read(out / "clusters").column_names == ["doc_id", "cluster_id", "is_representative"]
    assert read(out / "changed_clusters").column_names == ["old_cluster_id", "new_cluster_id"]
    pairs = read(out / "pairs")
    assert pairs.column_names[:3] == ["doc_a", "doc_b", "method"]
    assert all(
        a < b for a, b in zip(pairs["doc_a"].to_pylist(), pairs["doc_b"].to_pylist(), strict=True)
    )
    assert all(s >= 0.8 for s in pairs["similarity"].to_pylist())
    # deduplicated: new documents that are their cluster's representative, in a cluster no
    # document of day 1 belongs to; all input columns.
    of = after(spark, history, "day2")
    day1_clusters = {of[d] for d in assignment(root / "out-day1" / "clusters")}
    kept = set(read(out / "deduplicated").column("id").to_pylist())
    expected = {
        d for d, c in assignment(out / "clusters").items() if c == d and c not in day1_clusters
    }
    assert kept == expected
    assert read(out / "deduplicated").column_names == ["id", "text"]
    assert report["counts"]["deduplicated"] == len(kept)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run_id"] == report["run_id"] and manifest["batch"] == 2
    index = root / "index-after-day2"
    version = (index / CURRENT_FILE).read_text().strip()
    index_manifest = json.loads((index / version / "manifest.json").read_text())
    assert [b["run_id"] for b in index_manifest["batches"]] == [
        history["reports"]["day1"]["run_id"],
        report["run_id"],
    ]
    assert index_manifest["settings"]["num_perm"] == 200
    assert index_manifest["shingle_hash_version"] >= 1


def test_rerunning_a_committed_batch_changes_nothing(spark, history):
    root, index = history["root"], history["index"]
    config = build_config()
    before = tree_state(index)
    # Same output: the finished batch is kept as it is.
    again = run_incremental(spark, str(root / "day3"), str(root / "out-day3"), str(index), config)
    assert again["already_committed"] and again["run_id"] == history["reports"]["day3"]["run_id"]
    # Another output: the stored results are published again, identically (an older batch too).
    for day in ("day2", "day3"):
        out = root / f"again-{day}"
        redo = run_incremental(spark, str(root / day), str(out), str(index), config)
        assert redo["already_committed"]
        for name in ("clusters", "pairs", "changed_clusters", "deduplicated"):
            first = read(root / f"out-{day}" / name)
            assert canonical(read(out / name)).equals(canonical(first)), (day, name)
    assert tree_state(index) == before  # no new version, no new segment, nothing rewritten


def test_index_with_other_settings_is_refused(spark, history, tmp_path):
    root, index = history["root"], str(history["index"])
    day3, out = str(root / "day3"), str(tmp_path / "out")
    with pytest.raises(UserError, match=r"num_perm \(index 200, this run 128\)"):
        run_incremental(spark, day3, out, index, build_config(options={"num_perm": 128}))
    with pytest.raises(UserError, match=r"normalisation \(normalize.casefold"):
        run_incremental(
            spark, day3, out, index, build_config(overrides=["normalize.casefold=false"])
        )
    with pytest.raises(UserError, match=r"banding \(bands"):
        run_incremental(spark, day3, out, index, build_config(options={"bands": 20, "rows": 10}))
    with pytest.raises(UserError, match="minhash only"):
        run_incremental(spark, day3, out, index, build_config(options={"method": "simhash"}))
    # An index written under another shingle hash version.
    copy = tmp_path / "index"
    shutil.copytree(index, copy)
    current = copy / (copy / CURRENT_FILE).read_text().strip() / "manifest.json"
    manifest = json.loads(current.read_text())
    manifest["settings"]["shingle_hash_version"] += 1
    current.write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="shingle hash version"):
        run_incremental(spark, day3, out, str(copy), build_config())
    assert not (tmp_path / "out").exists()


def test_compaction_drops_dead_contents(spark, history, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(history["root"] / "index-after-day3", index)
    before = index_assignment(spark, index)
    old = Index.open(spark, str(index))
    old_pairs = old.table("pairs")
    assert old_pairs is not None
    n_pairs = old_pairs.count()
    summary = compact_index(spark, str(index), keep_versions=1)
    compacted = Index.open(spark, str(index))
    assert len(compacted.segments) == 1 and summary["segments_before"] == 3
    assert index_assignment(spark, index) == before
    # c's day-2 text lost its only document on day 3: its content and its edges (to a, b and
    # 0) are gone.
    assert summary["rows"]["contents"] == summary["live_contents"]
    assert summary["rows"]["pairs"] == n_pairs - 3
    for table in ("contents", "bands", "pairs"):
        assert len(list((index / table).glob("seg=*"))) == 1, table
    assert len(list(index.glob("v*"))) == 1


@pytest.mark.slow
def test_killed_run_leaves_the_index_and_outputs_intact(spark, history):
    """Day 3 was first run in a process of its own and SIGKILLed while it wrote the new index
    version (see :class:`KilledRun`); the history's day 3 is the run that came after it."""
    crash, root = history["crash"], history["root"]
    assert crash is not None and crash["returncode"] == -signal.SIGKILL
    before, after_kill = crash["before"], crash["after"]
    # It had started writing (a new segment), but the committed version, every file of the
    # index it refers to, and the previous output are untouched and readable.
    assert crash["marker"].startswith("contents/seg=s000003-")
    assert {k: v for k, v in after_kill["index"].items() if k in before["index"]} == before["index"]
    assert after_kill["out"] == before["out"]
    assert crash["assignment"] == after(spark, history, "day2")
    # Running again completed the batch (the other tests check its results) and cleared the
    # debris: only the committed version's segments remain.
    report = history["reports"]["day3"]
    assert not report["already_committed"] and report["index"]["version_before"].startswith(
        "v000002-"
    )
    index = root / "index-after-day3"
    live = {s["name"] for s in Index.open(spark, str(index)).segments}
    for table in ("contents", "bands", "pairs"):
        on_disk = {p.name.split("=", 1)[1] for p in (index / table).glob("seg=*")}
        assert on_disk <= live, table
    versions = sorted(p.name for p in index.glob("v*"))
    assert len(versions) == 3 and all((index / v / "manifest.json").is_file() for v in versions)
    assert not list(root.glob(".out-day3.*")) and not (root / "out-day3" / "_staging").exists()
    assert json.loads((root / "out-day3" / "report.json").read_text())["run_id"] == report["run_id"]


def test_sorted_sets():
    offsets, values = sorted_sets(
        np.array([0, 4, 4, 6]), np.array([9, 3, 9, 1, 7, 7], dtype=np.uint64)
    )
    assert offsets.tolist() == [0, 3, 3, 4] and values.tolist() == [1, 3, 9, 7]


def members_table(rows: list[tuple], id_type: pa.DataType) -> pa.Table:
    """(doc_id, exact_fp, old_cluster or None, prev_exact_fp or None, live_before or None)."""
    return pa.table(
        {
            "doc_id": pa.array([r[0] for r in rows], id_type),
            "has_text": pa.array([True] * len(rows)),
            "exact_fp": pa.array([r[1] for r in rows], pa.int64()),
            "old_cluster": pa.array([r[2] for r in rows], id_type),
            "is_old": pa.array([r[2] is not None for r in rows]),
            "batch": pa.array([1 if r[2] is not None else 2 for r in rows], pa.int32()),
            "prev_exact_fp": pa.array([r[3] for r in rows], pa.int64()),
            "prev_has_text": pa.array([None if r[3] is None else True for r in rows], pa.bool_()),
            "live_before": pa.array([r[4] for r in rows], pa.bool_()),
        }
    )


@pytest.mark.parametrize("big", [False, True])
def test_cluster_members_on_the_driver(big):
    """The driver kernel alone: a bridge merges two old clusters, an exact copy joins a third,
    an edge to a dead content is ignored; integer ids beyond 2**53 stay exact."""
    if big:
        base = 2**60
        a, b, c, zero, p1, p2, q, n = (base + i for i in (10, 20, 30, 5, 40, 41, 50, 60))
        id_type = pa.int64()
    else:
        a, b, c, zero, p1, p2, q, n = "a", "b", "c", "0", "p1", "p2", "q", "n"
        id_type = pa.string()
    members = members_table(
        [
            (a, 1, a, None, None),
            (b, 2, b, None, None),
            (p1, 3, p1, None, None),
            (p2, 3, p1, None, None),
            (c, 4, None, None, None),
            (zero, 5, None, None, None),
            (q, 3, None, None, True),
            (n, 6, None, 7, True),  # re-crawled with new text
        ],
        id_type,
    )
    edges = pa.table(
        {
            "fp_a": pa.array([1, 2, 1, 4], pa.int64()),
            "fp_b": pa.array([4, 4, 5, 99], pa.int64()),
            "jaccard": [0.9, 0.85, 0.95, 0.9],
            "estimate": [0.9, 0.8, 0.9, 0.9],
        }
    )
    result = cluster_members(members, edges)
    of = dict(
        zip(
            result.assigned.column("doc_id").to_pylist(),
            result.assigned.column("cluster_id").to_pylist(),
            strict=True,
        )
    )
    assert of == {a: a, b: a, c: a, zero: a, p1: p1, p2: p1, q: p1, n: n}
    assert result.changed.to_pylist() == [{"old_cluster_id": b, "new_cluster_id": a}]
    kept = dict(
        zip(
            result.assigned.column("doc_id").to_pylist(),
            result.assigned.column("kept").to_pylist(),
            strict=True,
        )
    )
    assert {d for d, k in kept.items() if k} == {n}
    found = {
        (r["doc_a"], r["doc_b"], r["method"])
        for r in result.pairs.select(["doc_a", "doc_b", "method"]).to_pylist()
    }
    assert found == {
        (p1, q, "exact"),
        (min(a, c), max(a, c), "minhash"),
        (min(b, c), max(b, c), "minhash"),
        (min(a, zero), max(a, zero), "minhash"),
    }
    stats = result.stats
    assert stats["merged_clusters"] == 1 and stats["joined_existing"] == 3
    assert stats["replaced"] == 1 and stats["replaced_unchanged"] == 0
    assert stats["deduplicated"] == 1 and stats["member_clusters"] == 3


def test_cluster_members_of_an_empty_batch():
    result = cluster_members(
        members_table([], pa.string()),
        pa.table(
            {
                "fp_a": pa.array([], pa.int64()),
                "fp_b": pa.array([], pa.int64()),
                "jaccard": pa.array([], pa.float64()),
                "estimate": pa.array([], pa.float64()),
            }
        ),
    )
    assert result.assigned.num_rows == result.pairs.num_rows == result.changed.num_rows == 0


# --------------------------------------------------------------------------------------------
# The command line (in this process, on the suite's SparkSession)


@pytest.fixture
def cli(spark, monkeypatch):
    """``neardup ...`` in this process: the commands get the suite's session and do not stop
    it."""
    from neardup_spark.cli.app import main

    for command in ("dedupe", "index"):
        monkeypatch.setattr(f"neardup_spark.cli.{command}.build_session", lambda *_, **__: spark)
    monkeypatch.setattr(spark, "stop", lambda: None)
    return main


def jobs_dedupe_main():
    """``main`` of ``jobs/dedupe.py``, the spark-submit entry point."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("jobs_dedupe", REPO / "jobs" / "dedupe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_cli_indexed_runs_info_and_compact(cli, tmp_path, capsys):
    day = tmp_path / "day"
    day.mkdir()
    pq.write_table(rows_table(CRAFTED_DAY1), day / "part-0.parquet")
    index, out = tmp_path / "index", tmp_path / "out"
    args = [str(day), str(out), "--index", str(index), "--index-buckets", "4"]
    assert cli(["dedupe", *args]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "new documents     7 (0 re-crawled)" in printed and "kept (new)        6" in printed
    assert "index             7 documents, 6 clusters, version v000001-" in printed
    assert not (out / "report.html").exists() and (out / "_SUCCESS").is_file()
    # The same batch again, through the spark-submit entry point: nothing is added.
    assert jobs_dedupe_main()(args) == 0
    assert "was already indexed: nothing added" in capsys.readouterr().out
    assert cli(["index", "info", str(index)]) == 0
    info = capsys.readouterr().out
    assert "documents         7 in 6 clusters" in info and "segments          1 (4 buckets" in info
    assert "num_perm 200, seed 42, 28 bands x 7 rows" in info and "batches           1" in info
    assert cli(["index", "compact", str(index), "--buckets", "2"]) == 0
    assert "segments          1 -> 1 (2 buckets)" in capsys.readouterr().out
    assert cli(["index", "info", str(index), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["buckets"] == 2 and summary["version"].startswith("v000002-")
    assert summary["counts"]["documents"] == 7 and len(summary["batches"]) == 1


def test_cli_user_errors_exit_2(cli, history, tmp_path, capsys):
    index, day3 = str(history["index"]), str(history["root"] / "day3")
    out = str(tmp_path / "out")
    cases = [
        (["--index", index, "--num-perm", "128"], r"num_perm (index 200, this run 128)"),
        (["--index", index, "--method", "simhash"], "--method minhash only"),
        (["--index-buckets", "8"], "--index-buckets needs --index"),
        (["--index", index, "--index-buckets", "0"], "--index-buckets must be >= 1"),
    ]
    for extra, message in cases:
        assert cli(["dedupe", day3, out, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert cli(["index", "info", str(tmp_path / "nothing")]) == 2
    assert "no index at" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
