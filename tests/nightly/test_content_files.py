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


@pytest.mark.parametrize("parts", [2, 4])
def test_a_segment_is_written_in_as_many_parts_as_asked_each_sorted(spark, tmp_path, parts):
    """``write_contents`` (Spark, compaction's writer): ``parts`` parts of about equal size,
    every content once, each part sorted by fingerprint. (By ``pmod(fp, parts)``, Spark's hash
    partitioning put both halves of a 2-part segment in one part, written by one task.)"""
    from neardup_spark.nightly.contents import read_contents, write_contents

    n, bands = 600, 3
    pages = [f"page {i} " * (i % 5 + 3) for i in range(n)]
    fps = exact_fingerprints(pa.array(pages)).fingerprints.view(np.int64)
    rows = [
        (int(fp), [int(fp) ^ b for b in range(bands)], page)
        for fp, page in zip(fps, pages, strict=True)
    ]
    rows_in = [rows[i] for i in np.random.default_rng(1).permutation(n)]
    contents = spark.createDataFrame(rows_in, "exact_fp long, band_keys array<long>, text string")
    written = write_contents(contents, str(tmp_path), parts, bands)
    assert len(written) == parts
    sizes = [part["rows"] for part in written]
    assert sum(sizes) == n and min(sizes) >= 0.6 * n / parts, sizes
    for part in written:
        part_fps, _ = read_keys(str(tmp_path / part["name"]) + KEYS_SUFFIX)
        assert np.all(part_fps[1:] > part_fps[:-1])
    back = read_contents(spark, [str(tmp_path / p["name"]) for p in written], bands).collect()
    assert sorted((r.exact_fp, r.band_keys, r.text) for r in back) == sorted(rows)


def test_a_content_without_a_key_list_or_a_text_or_twice_fails_the_write(spark, tmp_path):
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    from neardup_spark.nightly.contents import write_contents

    for rows in (
        [(1, [1, 2], "one"), (2, [3, 4], None)],
        [(1, [1, 2], "one"), (3, None, "three")],
        [(1, [1, 2], "one"), (1, [1, 2], "one")],
    ):
        contents = spark.createDataFrame(rows, "exact_fp long, band_keys array<long>, text string")
        with pytest.raises((PySparkException, Py4JJavaError), match="one row with a key list"):
            write_contents(contents, str(tmp_path), 1, 2)


def test_texts_in_any_order_are_written_in_fingerprint_order_in_whole_batches(tmp_path):
    """``write_part`` with ``text_rows`` (texts as they came, taken into order a block at a
    time): the same rows as from sorted texts, 8 rows a batch across blocks (5,000 texts)."""
    n = 5000
    pages = pa.array([f"page {i} " * (i % 4 + 1) for i in range(n)])
    unsorted = exact_fingerprints(pages).fingerprints.view(np.int64)
    by_fp = np.argsort(unsorted)
    fps, in_order = unsorted[by_fp], pages.take(pa.array(by_fp))
    shuffle = np.random.default_rng(5).permutation(n)
    arrived = in_order.take(pa.array(shuffle))  # arrived[j] = in_order[shuffle[j]]
    text_rows = np.argsort(shuffle)  # fps[i]'s text is arrived[text_rows[i]]
    keys = np.zeros((n, 2), np.int64)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_part(str(tmp_path / "a"), fps, keys, in_order)
    b = write_part(str(tmp_path / "b"), fps, keys, arrived, text_rows)
    texts_a = (tmp_path / "a" / a.name).with_suffix(TEXTS_SUFFIX)
    texts_b = (tmp_path / "b" / b.name).with_suffix(TEXTS_SUFFIX)
    assert (
        pa.ipc.open_file(str(texts_a)).read_all().equals(pa.ipc.open_file(str(texts_b)).read_all())
    )
    reader = pa.ipc.open_file(str(texts_b))
    assert reader.num_record_batches == n // TEXT_BATCH_ROWS
    sizes = {reader.get_batch(i).num_rows for i in range(reader.num_record_batches)}
    assert sizes == {TEXT_BATCH_ROWS}
    rows = np.array([0, 4095, 4096, 4097, 4999])
    got_fps, got = read_texts(str(texts_b), rows)
    assert got_fps.tolist() == fps[rows].tolist()
    assert got.to_pylist() == [in_order[int(i)].as_py() for i in rows]


def test_texts_of_one_part_are_fetched_by_every_task(spark, part):
    """``fetch_texts`` (Spark): the requested rows of one part come back, each once, from as
    many tasks as the session has cores (by part, one part was one task)."""
    from pyspark.sql import functions as F

    from neardup_spark.nightly.contents import fetch_texts

    path, fps, _, texts, _ = part
    rows = list(range(0, 100, 3))
    requests = spark.createDataFrame([(str(path), r) for r in rows], "part string, row long")
    fetched = fetch_texts(requests).withColumn("task", F.spark_partition_id()).collect()
    assert sorted((r.doc_id, r.text) for r in fetched) == sorted(
        (int(fps[r]), texts[r].as_py()) for r in rows
    )
    assert len({r.task for r in fetched}) == spark.sparkContext.defaultParallelism == 2


@pytest.mark.parametrize(
    "rows",
    [[5], [0, 1, 2, 97], list(range(0, 100, 3)), list(range(100))],
    ids=["one-batch", "few-batches", "most-batches", "whole-file"],
)
def test_texts_read_by_batch_or_whole_file_are_the_same(part, rows):
    """A few record batches are read one by one, most of the file at once (compaction and the
    deep check read whole parts): the same rows either way, each the text of its fingerprint."""
    path, fps, _, texts, _ = part
    rows = np.array(rows)
    got_fps, got = read_texts(str(path) + TEXTS_SUFFIX, rows)
    assert got_fps.tolist() == fps[rows].tolist()
    assert got.to_pylist() == [texts[int(i)].as_py() for i in rows]
