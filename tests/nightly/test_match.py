"""``neardup match``: a night's batch matched against an index built from the nights before it,
the index left as it was. Its matches are the oracle's pairs between the batch and the indexed
documents at the threshold; it removes what the night itself removes against indexed documents;
a reader lease keeps the version it reads from a writer's garbage collection."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.io.lease import hold_lease
from neardup_spark.nightly.match import run_match
from neardup_spark.nightly.readers import READERS_DIR, held_versions, reading
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.store import Index
from neardup_spark.quality.oracle import shingle_matrix, similar_pairs
from tests.nightly.history import BUCKETS, assignment, index_assignment, read
from tests.revisions import revision_chains

THRESHOLD = 0.8


def digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` and its SHA-256 (locks and heartbeats left out)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(("_lock", "_heartbeat"))
    }


@pytest.fixture(scope="module")
def indexed(spark, tmp_path_factory):
    """Chains of revisions over three nights; an index of the first two."""
    root = tmp_path_factory.mktemp("match")
    corpus = revision_chains(chains=30, versions=7, unrelated=60, seed=5)
    for night in (1, 2, 3):
        (root / f"night{night}").mkdir()
        part = corpus.filter(pa.compute.equal(corpus.column("night"), night))
        pq.write_table(part, root / f"night{night}" / "part-0.parquet")
    for night in (1, 2):
        run_incremental(
            spark, str(root / f"night{night}"), str(root / f"out{night}"), str(root / "index"),
            build_config(), buckets=BUCKETS,
        )  # fmt: skip
    return root, corpus


@pytest.fixture(scope="module")
def matched(spark, indexed):
    root, _ = indexed
    before = digest(root / "index")
    report = run_match(spark, str(root / "night3"), str(root / "matched"), str(root / "index"),
                       build_config())  # fmt: skip
    assert digest(root / "index") == before  # the index untouched
    assert not (root / "index" / READERS_DIR).exists() or not any(
        (root / "index" / READERS_DIR).iterdir()
    )
    return report, read(root / "matched" / "matches")


def test_the_matches_are_the_oracles_pairs_with_indexed_documents(indexed, matched):
    _, corpus = indexed
    report, matches = matched
    ids = corpus.column("id").to_pylist()
    night = corpus.column("night").to_pylist()
    config = build_config()
    matrix = shingle_matrix(corpus.column("text"), config.ngram, config.seed, config.normalize)
    i, j, _ = similar_pairs(matrix, THRESHOLD)
    truth = set()
    for a, b in zip(i.tolist(), j.tolist(), strict=True):
        for new, old in ((a, b), (b, a)):
            if night[new] == 3 and night[old] < 3:
                truth.add((ids[new], ids[old]))
    docs, held = matches.column("doc_id").to_pylist(), matches.column("indexed_id").to_pylist()
    found = set(zip(docs, held, strict=True))
    assert len(truth) > 20
    assert found <= truth  # every match verified (precision 1.000)
    assert len(found & truth) >= 0.97 * len(truth)  # what the LSH proposes
    at = {doc: k for k, doc in enumerate(ids)}
    exact = matrix.jaccard(
        np.array([at[d] for d in matches.column("doc_id").to_pylist()]),
        np.array([at[d] for d in matches.column("indexed_id").to_pylist()]),
    )
    assert np.allclose(matches.column("similarity").to_numpy(), exact)
    assert report["counts"]["match_rows"] == matches.num_rows


def test_it_removes_what_the_night_removes_against_the_index(spark, indexed, matched, tmp_path):
    root, _ = indexed
    report, matches = matched
    index_now = index_assignment(spark, root / "index")
    kept_of = dict(zip(matches.column("indexed_id").to_pylist(),
                       matches.column("kept_id").to_pylist(), strict=True))  # fmt: skip
    assert all(index_now[d] == k for d, k in kept_of.items())  # the indexed document's kept one
    copy = tmp_path / "index"
    shutil.copytree(root / "index", copy)
    run_incremental(spark, str(root / "night3"), str(tmp_path / "out3"), str(copy),
                    build_config(), buckets=BUCKETS)  # fmt: skip
    night = assignment(tmp_path / "out3" / "clusters")
    against_index = {d for d, k in night.items() if d != k and k in index_now}
    batch = pq.read_table(root / "night3").column("id").to_pylist()
    kept = set(read(root / "matched" / "deduplicated").column("id").to_pylist())
    removed = set(batch) - kept
    assert len(removed) == report["counts"]["removed"] > 5
    assert removed == against_index
    assert kept <= set(batch)


def test_a_missing_index_and_another_rule_are_refused(spark, indexed, tmp_path):
    root, _ = indexed
    with pytest.raises(UserError, match="no index at"):
        run_match(spark, str(root / "night3"), str(tmp_path / "o"), str(tmp_path / "none"),
                  build_config())  # fmt: skip
    with pytest.raises(UserError, match="components"):
        run_match(spark, str(root / "night3"), str(tmp_path / "o"), str(root / "index"),
                  build_config(options={"cluster_rule": "components"}))  # fmt: skip


def test_a_reader_keeps_its_version_from_a_nights_garbage_collection(spark, indexed, tmp_path):
    root, _ = indexed
    copy = tmp_path / "index"
    shutil.copytree(root / "index", copy)
    index = Index.open(spark, str(copy))
    read_version = index.name
    with reading(index.storage, index.root, read_version, "test reader"):
        assert held_versions(index.storage, index.root)[0] == {read_version}
        run_incremental(spark, str(root / "night3"), str(tmp_path / "o3"), str(copy),
                        build_config(), buckets=BUCKETS, keep_versions=1)  # fmt: skip
        assert (copy / read_version / "manifest.json").exists()  # still readable
        assert Index.open(spark, str(copy)).name != read_version
        verify = subprocess.run(  # a reader's lease is no damage
            [sys.executable, "-m", "neardup_spark", "index", "verify", str(copy)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert verify.returncode == 0, verify.stdout + verify.stderr
    run_incremental(spark, str(root / "night3"), str(tmp_path / "o3b"), str(copy),
                    build_config(), buckets=BUCKETS, keep_versions=1, overwrite=True)  # fmt: skip
    Index.open(spark, str(copy)).collect_garbage(1)
    assert not (copy / read_version).exists()  # released: collected


@pytest.mark.extended
def test_the_command_line_prints_and_exits_zero(indexed, tmp_path):
    root, _ = indexed
    out = subprocess.run(
        [sys.executable, "-m", "neardup_spark", "match", str(root / "night3"),
         str(tmp_path / "cli"), "--index", str(root / "index")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "matched" in out.stdout and "(unchanged)" in out.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "neardup_spark", "match", str(root / "night3"),
         str(tmp_path / "cli2"), "--index", str(tmp_path / "nothing")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert missing.returncode == 2
    assert "no index at" in missing.stderr


def test_a_batch_spark_reads_gives_the_same_outputs(spark, indexed, matched, tmp_path):
    """JSON lines: the per-document pass in Spark tasks, deduplicated/ by a Spark join."""
    root, _ = indexed
    report, matches = matched
    batch = pq.read_table(root / "night3")
    (tmp_path / "json").mkdir()
    batch.to_pandas().to_json(tmp_path / "json" / "part-0.jsonl", orient="records", lines=True)
    other = run_match(spark, str(tmp_path / "json"), str(tmp_path / "out"), str(root / "index"),
                      build_config())  # fmt: skip
    assert other["plan"]["sketch"]["where"] != "driver"
    assert other["plan"]["deduplicated"]["where"] == "spark_join"
    assert report["plan"]["deduplicated"]["where"] == "driver_copy"
    assert read(tmp_path / "out" / "matches").equals(matches)
    kept = sorted(read(tmp_path / "out" / "deduplicated").column("id").to_pylist())
    assert kept == sorted(read(root / "matched" / "deduplicated").column("id").to_pylist())


def test_an_index_of_an_earlier_version_without_similarity_keys_is_served(spark, indexed, tmp_path):
    """Indexes built before --similarity (0.5) hold no similarity settings: Jaccard."""
    root, _ = indexed
    copy = tmp_path / "index"
    shutil.copytree(root / "index", copy)
    index = Index.open(spark, str(copy))
    settings = dict(index.manifest["settings"])
    assert settings.pop("similarity") == "jaccard"
    settings.pop("containment_max_ratio")
    index.manifest["settings"] = settings  # as an earlier version wrote it
    index.check_settings(build_config())
    with pytest.raises(UserError, match="similarity"):
        index.check_settings(build_config(options={"similarity": "containment"}))


def test_it_runs_while_a_night_holds_the_index(spark, indexed, matched, tmp_path):
    """No writer's lock: a match neither waits for a night holding the index nor takes it."""
    root, _ = indexed
    _, matches = matched
    index = Index.open(spark, str(root / "index"))
    with hold_lease(index.storage, index.root, "a night", timeout=0):
        run_match(spark, str(root / "night3"), str(tmp_path / "out"), str(root / "index"),
                  build_config(), lock_timeout=0)  # fmt: skip
    assert read(tmp_path / "out" / "matches").equals(matches)
