"""A damaged index is found before it can change a result: each file's size and SHA-256 are
recorded at commit and checked by every night (default ``index_check: full``), by the keys scan
and the text reads (``quick``), and by ``neardup index verify``. Real files, damaged as a bad
disk, a partial copy or a botched restore leaves them."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.cli.app import main, run_command
from neardup_spark.errors import EXIT_FAILURE, IndexDamaged, index_damage_in
from neardup_spark.kernels.exact_fingerprint import exact_fingerprints
from neardup_spark.nightly.content_files import (
    FP,
    TEXT,
    TEXTS_SUFFIX,
    read_texts,
    write_part,
)
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.store import CURRENT_FILE
from tests.nightly.history import SPARK_PATH, config_of, tree_state
from tests.plans import planned


def damaged_copy(history, tmp_path: Path) -> Path:
    index = tmp_path / "index"
    shutil.copytree(history["root"] / "index-after-day2", index)
    return index


def manifest(index: Path) -> dict:
    name = (index / CURRENT_FILE).read_text().strip()
    return json.loads((index / name / "manifest.json").read_text())


def segment_files(index: Path, suffix: str) -> list[Path]:
    return sorted(index.glob(f"segments/*/*{suffix}")) + sorted(
        index.glob(f"segments/*/*/*{suffix}")
    )


def overwrite_middle(path: Path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(size // 2)
        original = f.read(32)
        f.seek(size // 2)
        f.write(bytes(255 - b for b in original))


def truncate(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def swap(a: Path, b: Path) -> None:
    tmp = a.with_name(a.name + ".swap")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def test_every_file_of_a_commit_is_recorded_with_its_size_and_sha256(history):
    index = history["root"] / "index-after-day2"
    m = manifest(index)
    on_disk = {
        str(p.relative_to(index)) for p in index.rglob("*")
        if p.is_file() and p.parts[len(index.parts)] in ("segments", "batches")
        and not p.name.startswith((".", "_"))
    }  # fmt: skip
    recorded = {f"segments/{s['name']}/{rel}" for s in m["segments"] for rel in s["files"]}
    recorded |= {f"{b['results']}/{rel}" for b in m["batches"] for rel in b["files"]}
    assert recorded == on_disk
    for segment in m["segments"]:
        for rel, (size, digest) in segment["files"].items():
            path = index / "segments" / segment["name"] / rel
            assert path.stat().st_size == size
            assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_an_intact_index_verifies_with_exit_0(history, capsys):
    assert main(["index", "verify", str(history["root"] / "index-after-day2")]) == 0
    out = capsys.readouterr().out
    assert "intact:" in out and "damaged" not in out


DAMAGES = {
    "truncated texts": lambda index: truncate(segment_files(index, ".texts.arrow")[0]),
    "overwritten middle of keys": lambda index: overwrite_middle(
        segment_files(index, ".keys.arrow")[0]
    ),
    "overwritten middle of texts": lambda index: overwrite_middle(
        segment_files(index, ".texts.arrow")[0]
    ),
    "deleted docs file": lambda index: segment_files(index, ".parquet")[0].unlink(),
    "swapped keys and texts": lambda index: swap(
        segment_files(index, ".keys.arrow")[0], segment_files(index, ".texts.arrow")[0]
    ),
    "swapped two segments' docs": lambda index: swap(
        *sorted(index.glob("segments/*/docs/*.parquet"))[:2]
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_file_is_named_by_verify_with_exit_1(history, tmp_path, capsys, damage):
    index = damaged_copy(history, tmp_path)
    DAMAGES[damage](index)
    assert main(["index", "verify", str(index)]) == 1
    captured = capsys.readouterr()
    damaged = [line for line in captured.out.splitlines() if line.startswith("damaged ")]
    assert damaged, captured.out
    assert all("segments/" in line for line in damaged)
    errors = captured.err.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: the index at ")
    assert "Restore the file(s)" in errors[0] and "rebuild the index" in errors[0]


@pytest.mark.parametrize("damage", ["overwritten middle of texts", "deleted docs file"])
def test_a_night_on_a_damaged_index_changes_nothing(spark, history, tmp_path, damage):
    index = damaged_copy(history, tmp_path)
    DAMAGES[damage](index)
    before = tree_state(index)
    with pytest.raises(IndexDamaged, match=r"is damaged: .*segments/"):
        run_incremental(
            spark,
            str(history["root"] / "day3"),
            str(tmp_path / "out"),
            str(index),
            config_of(),
        )
    assert tree_state(index) == before
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_a_quick_check_finds_damaged_keys_in_the_scan_on_the_executors(
    spark, history, tmp_path, caplog
):
    """The night's steps as Spark jobs: the keys scan runs in Spark tasks, whose failure comes
    back through the job's error."""
    caplog.set_level(logging.INFO, logger="neardup_spark.plan")
    index = damaged_copy(history, tmp_path)
    DAMAGES["overwritten middle of keys"](index)
    quick = config_of({"index_check": "quick"})
    with pytest.raises(Exception) as failed:
        run_incremental(
            spark, str(history["root"] / "day3"), str(tmp_path / "out"), str(index), quick,
            execution=SPARK_PATH,
        )  # fmt: skip
    assert planned(caplog.records) == {"sketch": "spark", "night": "spark"}
    assert not isinstance(failed.value, IndexDamaged)  # a Spark job's error, carrying the task's
    message = index_damage_in(failed.value)
    assert message is not None and ".keys.arrow: its bytes changed" in message
    assert run_command(lambda _: (_ for _ in ()).throw(failed.value), None) == EXIT_FAILURE


def test_a_text_read_back_is_checked_against_its_fingerprint(tmp_path):
    texts = pa.array([f"text number {i} of the part" for i in range(20)])
    fps = exact_fingerprints(texts).fingerprints.view(np.int64)
    order = np.argsort(fps)
    summary = write_part(str(tmp_path), fps[order], np.zeros((20, 2), np.int64), texts.take(order))
    path = str(tmp_path / (summary.name + TEXTS_SUFFIX))
    _, got = read_texts(path, np.array([3, 11]))
    assert got.to_pylist() == texts.take(order).take([3, 11]).to_pylist()
    # The same file rewritten with one text changed (a botched restore from another copy).
    changed = texts.take(order).to_pylist()
    changed[11] = changed[11].replace("part", "pact")
    table = pa.table({FP: pa.array(fps[order]), TEXT: pa.array(changed, pa.large_string())})
    os.remove(path)
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=8)
    assert read_texts(path, np.array([3]))[1].to_pylist() == [changed[3]]
    with pytest.raises(IndexDamaged, match="does not match its fingerprint"):
        read_texts(path, np.array([3, 11]))
