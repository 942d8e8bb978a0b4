"""The batch's stash (neardup_spark/nightly/text_stash.py): the normalised texts the Spark path's
per-document pass writes, read back by bucket for the new segment's parts and for verification.
The nights that use it end to end: tests/nightly/test_paths.py (the same index and outputs as the
driver's path)."""

from __future__ import annotations

import shutil
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from neardup_spark.batch.documents import normalized_texts_fn
from neardup_spark.columns import BAND_KEYS, DOC_ID, EXACT_FP, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.kernels.exact_fingerprint import exact_fingerprints
from neardup_spark.nightly.content_files import KEYS_SUFFIX, read_keys
from neardup_spark.nightly.contents import read_contents, write_contents_from_stash
from neardup_spark.nightly.text_stash import (
    STASH_BUCKETS,
    TextStash,
    bucket_of,
    bucket_range,
    content_rows,
    read_buckets,
    stash_codec,
    stash_files,
    stashed_texts,
    stashing_features,
    write_stash_file,
)
from neardup_spark.runtime.spark_compat import to_arrow
from neardup_spark.stages.documents import document_features

CONFIG = DedupeConfig()
BANDS = CONFIG.banding.bands


def fingerprinted_texts(config):
    """The oracle of the stash's texts: documents (``doc_id``, ``text``) -> ``doc_id``,
    ``exact_fp``, the normalised ``text`` of those with text, as a Spark stage over the batch
    function the per-document pass runs."""

    def transform(docs):
        schema = T.StructType(
            [
                T.StructField(DOC_ID, docs.schema[DOC_ID].dataType, False),
                T.StructField(EXACT_FP, T.LongType(), False),
                T.StructField(TEXT, T.StringType(), False),
            ]
        )
        normalize = normalized_texts_fn(config)

        def fingerprinted(batches):
            for batch in batches:
                normalized = normalize(batch.column(TEXT))
                fps, valid = exact_fingerprints(normalized)
                with_text = pa.array(valid)
                yield pa.RecordBatch.from_arrays(
                    [
                        batch.column(DOC_ID).filter(with_text),
                        pa.array(fps.view(np.int64)).filter(with_text),
                        normalized.cast(pa.string()).filter(with_text),
                    ],
                    names=[DOC_ID, EXACT_FP, TEXT],
                )

        return docs.select(DOC_ID, TEXT).mapInArrow(fingerprinted, schema)

    return transform


def rows_of(fps: list[int], ids: list[str], texts: list[str]) -> pa.Table:
    return pa.table(
        {
            EXACT_FP: pa.array(fps, pa.int64()),
            DOC_ID: pa.array(ids),
            BAND_KEYS: pa.array([[fp, fp ^ 1] for fp in fps], pa.list_(pa.int64())),
            TEXT: pa.array(texts, pa.large_string()),
        }
    )


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_a_stash_file_holds_bucket_b_in_its_record_batch_b(tmp_path, codec):
    """Uncompressed (a local stash) or zstd (on remote storage: ``stash_codec``)."""
    assert stash_codec(str(tmp_path / "a.arrow")) is None
    assert stash_codec("s3a://bucket/index/segments/s/_stash/a.arrow") == "zstd"
    fps = [0, -1, 5 << 56, (5 << 56) + 3, 1 << 56, 7]  # buckets 0, 255, 5, 5, 1, 0
    path = str(tmp_path / "a.arrow")
    rows = rows_of(fps, [f"d{i}" for i in range(6)], [f"t{i}" for i in range(6)])
    write_stash_file(path, rows, codec)
    reader = pa.ipc.open_file(path)
    assert reader.num_record_batches == STASH_BUCKETS
    sizes = [reader.get_batch(b).num_rows for b in range(STASH_BUCKETS)]
    assert (sizes[0], sizes[1], sizes[5], sizes[255], sum(sizes)) == (2, 1, 2, 1, 6)
    for b in (0, 1, 5, 255):
        assert set(bucket_of(reader.get_batch(b).column(EXACT_FP).to_numpy())) == {b}
    both = read_buckets([path, path], 0, 6)
    assert sorted(both.column(DOC_ID).to_pylist()) == sorted(["d0", "d2", "d3", "d4", "d5"] * 2)
    whole = read_buckets([path], 0, STASH_BUCKETS).sort_by(DOC_ID)
    assert whole.equals(rows.sort_by(DOC_ID))
    assert read_buckets([], 0, 6) is None


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 256])
def test_the_bucket_ranges_of_the_parts_cover_every_bucket_once(parts):
    ranges = [bucket_range(p, parts) for p in range(parts)]
    covered = [b for first, last in ranges for b in range(first, last)]
    assert covered == list(range(STASH_BUCKETS))
    assert max(last - first for first, last in ranges) - min(b - a for a, b in ranges) <= 1


def test_one_row_per_content_is_its_smallest_documents(tmp_path):
    rows = rows_of(
        [9, 3, 9, 3, 4], ["b", "z", "a", "c", "x"], ["nine-b", "3z", "nine-a", "3c", "4"]
    )
    keep = np.array([True, True, True, True, False])
    got = rows.take(pa.array(content_rows(rows, keep)))
    assert got.column(EXACT_FP).to_pylist() == [3, 9]
    assert got.column(DOC_ID).to_pylist() == ["c", "a"]
    assert got.column(TEXT).to_pylist() == ["3c", "nine-a"]


@pytest.fixture
def batch(spark):
    """300 documents in 3 partitions: copies (the same text under several ids), a null text,
    an empty one, one of punctuation only (no text once normalised)."""
    texts = [
        f"Page {i % 120}: " + " ".join(f"w{(i % 120) * 7 + k}" for k in range(30))
        for i in range(297)
    ]
    texts += [None, "", " ... "]
    rows = [(f"doc{i:03d}", t) for i, t in enumerate(texts)]
    return spark.createDataFrame(rows, f"{DOC_ID} string, {TEXT} string").repartition(3)


def test_the_stashing_pass_is_the_per_document_pass_and_stashes_every_text(spark, batch, tmp_path):
    directory = str(tmp_path / "stash")
    stashed = to_arrow(batch.transform(stashing_features(CONFIG, directory))).sort_by(DOC_ID)
    plain = to_arrow(batch.transform(document_features(CONFIG, with_sets=False))).sort_by(DOC_ID)
    assert stashed.equals(plain)
    stash = stash_files(LocalStorage(), directory)
    assert 1 <= len(stash.files) <= 3
    rows = read_buckets(stash.files, 0, STASH_BUCKETS)
    texts = to_arrow(batch.transform(fingerprinted_texts(CONFIG)))
    expect = sorted(
        zip(*(texts.column(c).to_pylist() for c in (DOC_ID, EXACT_FP, TEXT)), strict=True)
    )
    got = sorted(zip(*(rows.column(c).to_pylist() for c in (DOC_ID, EXACT_FP, TEXT)), strict=True))
    assert got == expect and len(got) == 297
    keys = dict(
        zip(plain.column(DOC_ID).to_pylist(), plain.column(BAND_KEYS).to_pylist(), strict=True)
    )
    assert all(
        keys[d] == k
        for d, k in zip(
            rows.column(DOC_ID).to_pylist(), rows.column(BAND_KEYS).to_pylist(), strict=True
        )
    )


@pytest.mark.parametrize("parts", [1, 3])
def test_the_segments_parts_from_the_stash_hold_each_new_content_once(
    spark, batch, tmp_path, parts
):
    """Every content of the batch but those the index holds, once, with its keys and text; part
    ``i`` the ``i``-th range of fingerprints, sorted. A file twice (a task run twice) changes
    nothing."""
    directory = str(tmp_path / "stash")
    features = to_arrow(batch.transform(stashing_features(CONFIG, directory)))
    stash = stash_files(LocalStorage(), directory)
    shutil.copy(stash.files[0], stash.files[0].replace(".arrow", "-again.arrow"))
    stash = stash_files(LocalStorage(), directory)
    texts = to_arrow(batch.transform(fingerprinted_texts(CONFIG)))
    by_fp = dict(
        zip(texts.column(EXACT_FP).to_pylist(), texts.column(TEXT).to_pylist(), strict=False)
    )
    keys = dict(
        zip(
            features.column(EXACT_FP).to_pylist(),
            features.column(BAND_KEYS).to_pylist(),
            strict=False,
        )
    )
    known = np.sort(np.array(sorted(by_fp)[::10], np.int64))
    out = tmp_path / "segment"
    written = write_contents_from_stash(spark, stash, str(out), parts, BANDS, known)
    new = sorted(set(by_fp) - set(known.tolist()))
    assert sum(p["rows"] for p in written) == len(new) == 120 - len(known)
    firsts = []
    for part in written:
        part_fps, _ = read_keys(str(out / part["name"]) + KEYS_SUFFIX)
        assert np.all(part_fps[1:] > part_fps[:-1])
        unsigned = part_fps.view(np.uint64)  # the parts' ranges are of unsigned values
        firsts.append((int(unsigned.min()), int(unsigned.max())))
    firsts.sort()
    assert all(a[1] < b[0] for a, b in pairwise(firsts))  # disjoint ranges
    back = read_contents(spark, [str(out / p["name"]) for p in written], BANDS).collect()
    assert sorted((r.exact_fp, r.band_keys, r.text) for r in back) == [
        (fp, keys[fp], by_fp[fp]) for fp in new
    ]


def test_verification_reads_the_texts_it_asks_for_from_the_stash(spark, batch, tmp_path):
    directory = str(tmp_path / "stash")
    batch.transform(stashing_features(CONFIG, directory)).collect()
    stash = stash_files(LocalStorage(), directory)
    texts = to_arrow(batch.transform(fingerprinted_texts(CONFIG)))
    by_fp = dict(
        zip(texts.column(EXACT_FP).to_pylist(), texts.column(TEXT).to_pylist(), strict=False)
    )
    wanted = sorted(by_fp)[::3]
    asked = spark.createDataFrame([(fp,) for fp in wanted], f"{EXACT_FP} long")
    got = {r[DOC_ID]: r[TEXT] for r in stashed_texts(asked, stash).collect()}
    assert got == {fp: by_fp[fp] for fp in wanted}
    elsewhere = TextStash(directory, stash.files[:0])
    assert stashed_texts(asked, elsewhere).count() == 0  # no files: nothing to read
    unknown = spark.createDataFrame([(wanted[0] ^ 1,)], f"{EXACT_FP} long")
    with pytest.raises(Exception, match="stash lacks texts"):
        stashed_texts(unknown, stash).collect()
