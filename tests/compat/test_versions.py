"""The compact suite of ``make test-compat`` (with ``tests/kernels``): the pipeline on a small
generated corpus with each method, a nightly day 1 + day 2 against one full run, and the
command's exit codes. Run on the newest Spark 3.5.x and 4.x, each result must equal the pinned
Spark's (``conftest.py``); under ``make test`` they check their own invariants.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.nightly.run import run_incremental
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.runtime.faults import FAIL_ONCE_ENV
from tests.nightly.history import index_assignment

REPO = Path(__file__).resolve().parents[2]
METHODS = ("minhash", "simhash", "exact")
DAY1_DOCS = 160


def clusters_of(path: Path) -> dict[str, str]:
    table = ds.dataset(str(path)).to_table()
    return dict(
        zip(table.column("doc_id").to_pylist(), table.column("cluster_id").to_pylist(), strict=True)
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("compat")
    table, truth = generate_corpus(240, seed=11, mean_words=60)
    for name, part in (
        ("all", table),
        ("day1", table.slice(0, DAY1_DOCS)),
        ("day2", table.slice(DAY1_DOCS)),
    ):
        (root / name).mkdir()
        pq.write_table(part, root / name / "part-0.parquet")
    return {"root": root, "truth": truth}


@pytest.fixture(scope="module")
def full_runs(spark, corpus) -> dict[str, dict[str, str]]:
    """The clusters of one full run per method over the whole corpus."""
    root = corpus["root"]
    found = {}
    for method in METHODS:
        out = root / f"full-{method}"
        report = run(spark, str(root / "all"), str(out), build_config(options={"method": method}))
        assert report["counts"]["input_rows"] == 240
        found[method] = clusters_of(out / "clusters")
    return found


def test_full_runs_match_the_pinned_spark(corpus, full_runs, compat_recorder):
    for method in METHODS:
        compat_recorder.check(f"full/{method}", sorted(full_runs[method].items()))
    # Under the anchored rule (the default), no planted pair at Jaccard >= 0.8 keeps both of its
    # documents, and a removed document's cluster is a kept document; exact removes a subset.
    truth = corpus["truth"].filter(pa.compute.greater_equal(corpus["truth"]["jaccard"], 0.8))
    minhash, exact = full_runs["minhash"], full_runs["exact"]
    planted = list(zip(truth["doc_a"].to_pylist(), truth["doc_b"].to_pylist(), strict=True))
    kept = {doc for doc, cluster in minhash.items() if doc == cluster}
    assert planted and not any(a in kept and b in kept for a, b in planted)
    assert all(cluster in kept for cluster in minhash.values())
    removed_by_exact = {doc for doc, cluster in exact.items() if doc != cluster}
    assert removed_by_exact < {doc for doc in minhash if doc not in kept}


def test_nightly_day1_day2_equals_one_full_run(spark, corpus, full_runs, compat_recorder, tmp_path):
    root, index = corpus["root"], tmp_path / "index"
    for day in ("day1", "day2"):
        run_incremental(spark, str(root / day), str(tmp_path / day), str(index), build_config())
    day2 = clusters_of(tmp_path / "day2" / "clusters")
    assert len(day2) == 240 - DAY1_DOCS
    # The index after day 2 holds one full run's clusters (ids grow with crawl time here, so
    # the stable ids are the full run's too); day 2's output carries them for its documents.
    indexed = index_assignment(spark, index)
    assert indexed == full_runs["minhash"]
    assert day2 == {d: indexed[d] for d in day2}
    compat_recorder.check("nightly/index", sorted(indexed.items()))


def neardup(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "neardup_spark", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
        cwd=REPO,
    )


@pytest.mark.slow
def test_exit_codes(tmp_path):
    """0 for a run, 2 for a user error (one ``error:`` line, no traceback), 1 for a job
    failure (a task failing with no retry left)."""
    good, dup = tmp_path / "good.parquet", tmp_path / "dup.parquet"
    texts = ["one two three four five six seven"] * 2 + ["other words entirely here now"]
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": texts}), good)
    pq.write_table(pa.table({"id": ["a", "a", "c"], "text": texts}), dup)
    local = ("--master", "local[2]", "--no-report", "--set", "spark.sql.shuffle.partitions=2")
    done = neardup("dedupe", str(good), str(tmp_path / "o1"), *local)
    assert done.returncode == 0, done.stderr[-3000:]
    assert clusters_of(tmp_path / "o1" / "clusters") == {"a": "a", "b": "a", "c": "c"}
    refused = neardup("dedupe", str(dup), str(tmp_path / "o2"), *local)
    assert refused.returncode == 2, refused.stderr[-3000:]
    # Only neardup's own lines: the error and the stage lines (a quiet Spark console).
    lines = refused.stderr.splitlines()
    assert lines[-1] == "error: ids in column 'id' are not unique: 'a' (2x)"
    assert [line for line in lines[:-1] if " INFO neardup_spark.progress: stage=" not in line] == []
    env = {FAIL_ONCE_ENV: str(tmp_path / "marker")}
    failed = neardup("dedupe", str(good), str(tmp_path / "o3"), *local, env=env)
    assert failed.returncode == 1 and "injected task failure" in failed.stderr
    assert not (tmp_path / "o3" / "_SUCCESS").exists()
