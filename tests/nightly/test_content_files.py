"""The index's contents files (no Spark): a part written and read back, the probe against brute
force, texts fetched by row without reading the rest."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.kernels.exact_fingerprint import exact_fingerprints
from neardup_spark.nightly import content_files
from neardup_spark.nightly.content_files import (
    KEYS_SUFFIX,
    TEXT_BATCH_ROWS,
    TEXTS_SUFFIX,
    probe_part,
    read_keys,
    read_texts,
    sorted_member_mask,
    write_part,
)


@pytest.fixture
def part(tmp_path):
    rng = np.random.default_rng(7)
    n, bands = 100, 5
    pages = pa.array([f"text number {i} of a longer page " * (i % 7 + 40) for i in range(n)])
    # The index is content-addressed: a text's fingerprint is its SHA-256-64, parts sorted by it.
    unsorted = exact_fingerprints(pages).fingerprints.view(np.int64)
    order = np.argsort(unsorted)
    fps, texts = unsorted[order], pages.take(pa.array(order))
    keys = rng.integers(-(2**63), 2**63 - 1, (n, bands), dtype=np.int64)
    keys[10, 2] = keys[20, 2] = keys[30, 4] = 12345  # one key three contents share
    summary = write_part(str(tmp_path), fps, keys, texts)
    return tmp_path / summary.name, fps, keys, texts, summary


def test_a_part_reads_back_what_was_written(part):
    path, fps, keys, texts, summary = part
    assert summary.rows == 100 and summary.name == content_files.part_name(int(fps[0]))
    got_fps, got_keys = read_keys(str(path) + KEYS_SUFFIX)
    assert np.array_equal(got_fps, fps) and np.array_equal(got_keys, keys)
    rows = np.array([0, 3, 8, 9, 57, 99])
    got_rows_fps, got_texts = read_texts(str(path) + TEXTS_SUFFIX, rows)
    assert got_rows_fps.tolist() == fps[rows].tolist()
    assert got_texts.to_pylist() == [texts[int(i)].as_py() for i in rows]
    assert summary.texts_bytes < sum(len(t) for t in texts.to_pylist())  # compressed


def test_texts_are_read_by_record_batch(part):
    path, *_ = part
    reader = pa.ipc.open_file(str(path) + TEXTS_SUFFIX)
    assert reader.num_record_batches == -(-100 // TEXT_BATCH_ROWS)
    assert all(reader.get_batch(i).num_rows <= TEXT_BATCH_ROWS for i in range(3))


def test_member_mask_against_python_sets():
    rng = np.random.default_rng(3)
    values = rng.integers(-(2**63), 2**63 - 1, 5000, dtype=np.int64)
    members = np.sort(np.r_[values[::7], rng.integers(-(2**63), 2**63 - 1, 300, dtype=np.int64)])
    expected = np.array([v in set(members.tolist()) for v in values.tolist()])
    assert np.array_equal(sorted_member_mask(values, members), expected)
    assert not sorted_member_mask(values, members[:0]).any()


def test_probe_finds_known_contents_and_the_smallest_matches_per_key(part):
    _, fps, keys, _, _ = part
    batch_fps = np.sort(np.r_[fps[[5, 50]], np.array([1, 2], np.int64)])
    batch_keys = np.sort(np.array([12345, keys[42, 0], 777], np.int64))
    hits = probe_part(fps, keys, batch_fps, batch_keys, top=2)
    assert sorted(hits.known.tolist()) == sorted(fps[[5, 50]].tolist())
    got = sorted(zip(hits.keys.tolist(), hits.fps.tolist(), hits.rows.tolist(), strict=False))
    # key 12345: three contents (rows 10, 20, 30) hold it; the two smallest fps are kept
    expected = [(12345, int(fps[r]), r) for r in (10, 20)] + [(int(keys[42, 0]), int(fps[42]), 42)]
    assert got == sorted(expected)
