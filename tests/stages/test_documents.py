"""The per-document stages (text features, MinHash sketch) on tiny inline DataFrames."""

from __future__ import annotations

from pyspark.sql import types as T

from neardup_spark.columns import (
    BAND_KEYS,
    DOC_ID,
    EXACT_FP,
    HAS_TEXT,
    N_CHARS,
    N_WORDS,
    NORMALIZED,
    TEXT_IS_NULL,
)
from neardup_spark.stages.documents import (
    minhash_schema,
    minhash_sketch,
    text_features,
    text_schema,
)


def test_text_features_stage(fingerprints, spark, base_text):
    assert fingerprints.schema == text_schema(T.StringType())
    rows = {r[DOC_ID]: r for r in fingerprints.collect()}
    assert rows["a"][N_WORDS] == 60 and rows["a"][HAS_TEXT] and rows["a"][NORMALIZED] == base_text
    assert rows["d"][TEXT_IS_NULL] and not rows["d"][HAS_TEXT] and rows["d"][N_WORDS] == 0
    assert not rows["e"][TEXT_IS_NULL] and not rows["e"][HAS_TEXT] and rows["e"][NORMALIZED] == ""
    assert rows["f"][N_WORDS] == 2 and rows["f"][N_CHARS] == 9
    assert rows["d"][EXACT_FP] == rows["e"][EXACT_FP] == 0
    assert len({r[EXACT_FP] for r in rows.values()}) == 5


def test_sketch_schema_and_values(sketches, config):
    assert sketches.schema == minhash_schema(T.StringType())
    rows = {r[DOC_ID]: r for r in sketches.collect()}
    assert len(rows["a"][BAND_KEYS]) == config.banding.bands
    assert len(rows["a"]["sketch"]) == 4 * config.num_perm
    assert len(rows["a"]["shingles"]) == 8 * 56
    assert rows["d"][BAND_KEYS] == [] and rows["e"][BAND_KEYS] == []
    assert len(rows["f"]["shingles"]) == 8 and len(rows["f"][BAND_KEYS]) == config.banding.bands


def test_sketch_keeps_integer_ids(spark, config):
    df = spark.createDataFrame([(7, "x y z"), (3, None)], "doc_id long, text string")
    out = df.transform(text_features(config.normalize)).transform(minhash_sketch(config))
    assert out.schema[DOC_ID].dataType == T.LongType()
    assert sorted(r[DOC_ID] for r in out.collect()) == [3, 7]
