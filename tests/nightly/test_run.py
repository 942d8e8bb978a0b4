"""Incremental runs against a persistent index (``neardup_spark.nightly.run``), on real Spark.

One small history is shared by the tests (each run costs seconds of Spark jobs): a generated
corpus cut in two days, plus hand-made documents where a day-2 page bridges two day-1 clusters
(merge, stable ids, ``changed_clusters``); day 3 re-crawls pages, which splits them again. Day 1
then day 2 incrementally is compared with one full run over both (equivalence); batches are
re-run (idempotency), and a run is killed mid-write (crash).
"""

from __future__ import annotations

import collections
import json
import shutil
import signal

import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.lease import LOCK_FILE, is_lease_entry
from neardup_spark.io.ownership import OWNERSHIP_FILE
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.store import CURRENT_FILE, Index
from tests.nightly.history import (
    CRAFTED,
    CRAFTED_DAY1,
    CRAFTED_DAY2,
    DAY3,
    after,
    assignment,
    canonical,
    config_of,
    partition,
    read,
    tree_state,
)
from tests.plans import ran

# --------------------------------------------------------------------------------------------
# The history


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
    ran(history["reports"]["day2"], sketch="driver", night="driver", docs_scan="driver")
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
    # The Spark twin of the driver path, its components in distributed rounds.
    assert report["components"]["strategy"] == "distributed"
    ran(report, sketch="spark", night="spark", night_components="spark")
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
    assert read(out / "deduplicated").column_names == ["id", "text", "duplicates"]
    sizes = collections.Counter(assignment(out / "clusters").values())  # the night's documents
    rows = read(out / "deduplicated").to_pylist()
    dups = {row["id"]: row["duplicates"] for row in rows}
    assert dups == {d: sizes[d] - 1 for d in kept}
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
    config = config_of()
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
        run_incremental(spark, day3, out, index, config_of({"num_perm": 128}))
    with pytest.raises(UserError, match=r"normalisation \(normalize.casefold"):
        run_incremental(
            spark,
            day3,
            out,
            index,
            config_of(overrides=["normalize.casefold=false"]),
        )
    with pytest.raises(UserError, match=r"banding \(bands"):
        run_incremental(spark, day3, out, index, config_of({"bands": 20, "rows": 10}))
    with pytest.raises(UserError, match="minhash only"):
        run_incremental(spark, day3, out, index, config_of({"method": "simhash"}))
    # An index written under another shingle hash version.
    copy = tmp_path / "index"
    shutil.copytree(index, copy)
    current = copy / (copy / CURRENT_FILE).read_text().strip() / "manifest.json"
    manifest = json.loads(current.read_text())
    manifest["settings"]["shingle_hash_version"] += 1
    current.write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="shingle hash version"):
        run_incremental(spark, day3, out, str(copy), config_of())
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_killed_run_leaves_the_index_and_outputs_intact(spark, history):
    """Day 3 was first run in a process of its own and SIGKILLed while it wrote the new index
    version (see :class:`KilledRun`); the history's day 3 is the run that came after it."""
    crash, root = history["crash"], history["root"]
    assert crash is not None and crash["returncode"] == -signal.SIGKILL
    assert crash["killed_while_paused"]  # killed at its pause point, not by the deadline
    before, after_kill = crash["before"], crash["after"]
    # It had started writing (a new segment), but the committed version, every file of the
    # index it refers to, and the previous output are untouched and readable.
    # (The job's ownership records list what it was about to write.)
    assert crash["marker"].startswith("segments/s000003-")
    kept = {k: v for k, v in before["index"].items() if k != OWNERSHIP_FILE}
    assert {k: v for k, v in after_kill["index"].items() if k in kept} == kept
    # It held the index's and OUTPUT's locks (the run after it took them over: it ran on).
    assert LOCK_FILE in after_kill["index"] and LOCK_FILE in after_kill["out"]
    out_files = {k: v for k, v in after_kill["out"].items() if not is_lease_entry(k)}
    assert {k: v for k, v in out_files.items() if k != OWNERSHIP_FILE} == {
        k: v for k, v in before["out"].items() if k != OWNERSHIP_FILE
    }
    assert crash["assignment"] == after(spark, history, "day2")
    # Running again completed the batch (the other tests check its results) and cleared the
    # debris: only the committed version's segments remain.
    report = history["reports"]["day3"]
    assert not report["already_committed"] and report["index"]["version_before"].startswith(
        "v000002-"
    )
    index = root / "index-after-day3"
    live = {s["name"] for s in Index.open(spark, str(index)).segments}
    on_disk = {p.name for p in (index / "segments").iterdir()}
    assert on_disk <= live
    versions = sorted(p.name for p in index.glob("v*"))
    assert len(versions) == 3 and all((index / v / "manifest.json").is_file() for v in versions)
    assert not list(root.glob(".out-day3.*")) and not (root / "out-day3" / "_staging").exists()
    assert json.loads((root / "out-day3" / "report.json").read_text())["run_id"] == report["run_id"]


# --------------------------------------------------------------------------------------------
# The command line (in this process, on the suite's SparkSession)


def test_a_nights_report_counts_its_commit_and_publishing(spark, history):
    """OUTPUT's report of the run that indexed the batch counts everything up to its outputs,
    as a full run's counts its writes: the index commit and the publishing (``deduplicated/``
    is written then), inside ``wall_seconds``. The report kept with the batch in the index
    stops at the index's own writes."""
    import json

    from neardup_spark.nightly.store import Index

    index = Index.open(spark, str(history["index"]))
    for day in ("day1", "day2"):
        report = history["reports"][day]
        stages = report["stage_seconds"]
        assert {"write", "commit", "publish"} <= set(stages), stages
        assert sum(stages.values()) <= report["wall_seconds"] + 0.01 * len(stages)
        published = json.loads((history["root"] / f"out-{day}" / "report.json").read_text())
        assert published["wall_seconds"] == report["wall_seconds"]
        kept = history["index"] / index.batch(report["run_id"])["results"] / "report.json"
        stored = json.loads(kept.read_text())
        assert "publish" not in stored["stage_seconds"]
        assert stored["wall_seconds"] < report["wall_seconds"]
