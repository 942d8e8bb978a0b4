"""Runs that overlap on one index or one OUTPUT (docs/operations/locking.md): real `neardup`
processes started together, a compaction during a night, a SIGKILLed lock holder, and full
dedupe runs racing for one OUTPUT. No accepted night's documents are ever lost or doubled."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.lease import LOCK_FILE, acquire
from neardup_spark.nightly.compaction import compact_index
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.store import Index, index_info
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.runtime.faults import PAUSE_AT_ENV, PAUSE_MARKER_ENV
from tests.nightly.history import REPO, index_assignment, read, rows_table, text

LOCAL = ("--master", "local[1]", "--set", "spark.sql.shuffle.partitions=2")
DEADLINE = 600.0


def nights(root: Path, count: int, seed: int = 11) -> list[Path]:
    """``count`` batches of a shuffled generated corpus (near-duplicates fall on different
    nights), each with an exact copy of one text and a near-duplicate of another."""
    corpus, _ = generate_corpus(60 * count, seed=seed, mean_words=40)
    order = np.random.default_rng(seed).permutation(corpus.num_rows)
    corpus = corpus.take(pa.array(order))
    paths = []
    for k in range(count):
        crafted = rows_table([(f"copy{k}", text(0, 80)), (f"near{k}", text(100, 180, swap=k))])
        part = pa.concat_tables([corpus.slice(60 * k, 60), crafted])
        (root / f"night{k}").mkdir()
        pq.write_table(part, root / f"night{k}" / "part-0.parquet")
        paths.append(root / f"night{k}")
    return paths


def neardup(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "neardup_spark", *args],
        cwd=REPO,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(condition, what: str, seconds: float = DEADLINE) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def ids_of(path: Path) -> set[str]:
    return set(read(path).column("id").to_pylist())


def check_output(out: Path, night: Path) -> None:
    """The output contract: every input document once in clusters/, kept rows unique."""
    clusters = read(out / "clusters").column("doc_id").to_pylist()
    assert sorted(clusters) == sorted(ids_of(night)) and (out / "_SUCCESS").exists()
    kept = read(out / "deduplicated").column("id").to_pylist()
    assert len(kept) == len(set(kept)) and set(kept) <= ids_of(night)


def replay(spark, batches: list[Path], index: Path) -> dict[str, str]:
    for k, batch in enumerate(batches):
        run_incremental(
            spark,
            str(batch),
            str(index.parent / f"{index.name}-out{k}"),
            str(index),
            build_config(),
        )
    return index_assignment(spark, index)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # several JVMs on a 2-core machine
def test_nights_started_together_all_land_in_the_index_once(spark, tmp_path):
    """Three `neardup dedupe NIGHT OUT --index DIR` processes at once; the third writes the
    first one's OUTPUT. Each night waits for the index, then adds its batch on top of the one
    before: all end in the index once, as a sequential replay of their commit order. Of the
    two runs on one OUTPUT, the later one finds a finished run there and stops with exit 2
    before adding anything; rerun with --overwrite, it adds its batch on top."""
    batches = nights(tmp_path, 3)
    index = tmp_path / "index"
    outs = [tmp_path / "out0", tmp_path / "out1", tmp_path / "out0"]
    procs = [
        neardup("dedupe", str(b), str(o), "--index", str(index), "--index-buckets", "2", *LOCAL)
        for b, o in zip(batches, outs, strict=True)
    ]
    done = [p.communicate(timeout=DEADLINE) for p in procs]
    codes = [p.returncode for p in procs]
    assert codes[1] == 0 and sorted([codes[0], codes[2]]) == [0, 2], [e[-3000:] for _, e in done]
    refused = 0 if codes[0] == 2 else 2
    err = done[refused][1]
    assert "already holds a finished run" in err and "Traceback" not in err, err[-3000:]
    assert sum("is locked by" in e for _, e in done) >= 1  # they did overlap
    accepted = [k for k in range(3) if codes[k] == 0]
    info = index_info(None, str(index))
    by_run = {b["run_id"]: b["seq"] for b in info["batches"]}
    reports = {k: json.loads((outs[k] / "report.json").read_text()) for k in accepted}
    order = sorted(accepted, key=lambda k: by_run[reports[k]["run_id"]])
    assert len(info["batches"]) == 2 and sorted(by_run.values()) == [1, 2]
    docs = set().union(*(ids_of(batches[k]) for k in accepted))
    assert info["counts"]["documents"] == len(docs)
    assert set(index_assignment(spark, index)) == docs  # each document's current row, once
    for k in accepted:
        check_output(outs[k], batches[k])
    # The refused night, rerun with --overwrite: on top of the other two.
    run_incremental(
        spark, str(batches[refused]), str(outs[refused]), str(index), build_config(), True
    )
    check_output(outs[refused], batches[refused])
    assert index_info(None, str(index))["counts"]["documents"] == len(
        docs | ids_of(batches[refused])
    )
    # The same nights one after the other, in the order they committed: the same clusters.
    assert index_assignment(spark, index) == replay(
        spark, [batches[k] for k in [*order, refused]], tmp_path / "replay"
    )
    assert not (index / LOCK_FILE).exists() and not (outs[0] / LOCK_FILE).exists()


def start_held_night(batch: Path, out: Path, index: Path, marker: Path) -> subprocess.Popen:
    """A nightly run held before its index commit (it holds the index's lock there)."""
    env = {PAUSE_AT_ENV: "before_index_commit", PAUSE_MARKER_ENV: str(marker)}
    return neardup("dedupe", str(batch), str(out), "--index", str(index), *LOCAL, env=env)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # several JVMs on a 2-core machine
def test_compaction_waits_for_a_night_and_a_killed_nights_lock_is_taken_over(
    spark, tmp_path, caplog
):
    batches = nights(tmp_path, 3, seed=12)
    index = tmp_path / "index"
    config = build_config()
    run_incremental(spark, str(batches[0]), str(tmp_path / "out0"), str(index), config)
    # Night 1 holds the lock, paused before its commit; a compaction starts meanwhile.
    marker = tmp_path / "held"
    night = start_held_night(batches[1], tmp_path / "out1", index, marker)
    wait_for(lambda: marker.exists() or night.poll() is not None, "night 1 to hold")
    assert night.poll() is None, night.communicate()[1][-3000:]
    compacted: list = []
    caplog.set_level(logging.WARNING, logger="neardup_spark.io.lease")
    compaction = threading.Thread(
        target=lambda: compacted.append(compact_index(spark, str(index), lock_timeout=DEADLINE))
    )
    compaction.start()
    wait_for(lambda: "is locked by nightly run" in caplog.text, "the compaction to wait")
    assert not compacted
    marker.unlink()  # night 1 goes on and commits; then the compaction runs
    assert night.wait(DEADLINE) == 0, night.communicate()[1][-3000:]
    compaction.join(DEADLINE)
    (summary,) = compacted
    assert summary["version"].startswith("v000003-") and summary["segments_before"] == 2
    info = index_info(None, str(index))
    assert [b["seq"] for b in info["batches"]] == [1, 2]
    assert info["counts"]["documents"] == len(ids_of(batches[0]) | ids_of(batches[1]))
    assert set(index_assignment(spark, index)) == ids_of(batches[0]) | ids_of(batches[1])
    # Night 2 SIGKILLed while it holds the lock: the next run here takes it over at once.
    marker = tmp_path / "held2"
    killed = start_held_night(batches[2], tmp_path / "out2", index, marker)
    wait_for(lambda: marker.exists() or killed.poll() is not None, "night 2 to hold")
    holder = json.loads((index / LOCK_FILE).read_text())
    assert holder["pid"] == killed.pid
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(60)
    out2 = tmp_path / "out2"
    run_incremental(spark, str(batches[2]), str(out2), str(index), config, lock_timeout=0)
    assert "broke the stale lock" in caplog.text
    check_output(out2, batches[2])
    assert index_assignment(spark, index) == replay(spark, batches, tmp_path / "replay-all")
    assert Index.open(spark, str(index)).version == 4


def test_full_runs_racing_for_one_output(spark, tmp_path, caplog):
    """Two dedupe runs into one OUTPUT at once: the second waits, then finds a finished run
    (exit 2's UserError) or, with overwrite, replaces it cleanly."""
    corpus, _ = generate_corpus(120, seed=3, mean_words=40)
    pq.write_table(corpus, tmp_path / "in.parquet")
    out = tmp_path / "out"
    caplog.set_level(logging.WARNING, logger="neardup_spark.io.lease")
    for overwrite in (False, True):
        results: list = []

        def one_run(results=results, overwrite=overwrite) -> None:
            try:
                results.append(
                    run(spark, str(tmp_path / "in.parquet"), str(out), build_config(), overwrite)
                )
            except UserError as exc:
                results.append(exc)

        runs = [threading.Thread(target=one_run) for _ in range(2)]
        for thread in runs:
            thread.start()
        for thread in runs:
            thread.join(DEADLINE)
        reports = [r for r in results if isinstance(r, dict)]
        errors = [str(r) for r in results if not isinstance(r, dict)]
        if not overwrite:
            assert len(reports) == 1 and len(errors) == 1, results
            assert "already holds a finished run" in errors[0]
        else:
            assert len(reports) == 2, results
        clusters = read(out / "clusters").column("doc_id").to_pylist()
        assert sorted(clusters) == sorted(corpus.column("id").to_pylist())
        assert not (out / "_staging").exists() and not (out / LOCK_FILE).exists()
    assert caplog.text.count("is locked by") >= 1


def test_lock_timeout_zero_exits_2_naming_the_holder(spark, tmp_path, monkeypatch, capsys):
    from neardup_spark.cli.app import main

    monkeypatch.setattr("neardup_spark.cli.dedupe.build_session", lambda *_, **__: spark)
    # On the class: an instance attribute, once undone, would shadow later class-level patches
    monkeypatch.setattr(type(spark), "stop", lambda self: None)
    (batch,) = nights(tmp_path, 1)
    index = tmp_path / "index"
    held = acquire(LocalStorage(), str(index), "a night in another terminal")
    try:
        args = [str(batch), str(tmp_path / "out"), "--index", str(index), "--lock-timeout", "0"]
        assert main(["dedupe", *args]) == 2
    finally:
        held.release()
    err = capsys.readouterr().err
    assert "is locked by another run: a night in another terminal" in err
    assert f"pid {os.getpid()} on host" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() and sorted(p.name for p in index.iterdir()) == []
