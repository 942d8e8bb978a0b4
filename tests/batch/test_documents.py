"""The per-document function: verification recomputes exactly the sets the full pass computes."""

from __future__ import annotations

import pytest

from neardup_spark.config import build_config

BASE = " ".join(f"word{i}" for i in range(60))
NEAR = BASE.replace("word30", "changed")


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["ngram=3", "num_perm=16"],
        ["char_ngram=4", "ngram=7"],
        ["shingle_unit=char"],
        ["normalize.casefold=false", "normalize.collapse_whitespace=false"],
    ],
)
@pytest.mark.parametrize("binary", [False, True])
def test_verification_sets_equal_the_per_document_pass(options, binary):
    """Verification computes only shingles and sketch, and gets what the full pass stores."""
    import pyarrow as pa

    from neardup_spark.batch.documents import documents_columns_fn, shingle_sets_fn
    from neardup_spark.columns import SHINGLES, SKETCH

    config = build_config(overrides=options)
    texts = [
        BASE,
        NEAR,
        None,
        "",
        " ,. ",
        "Caf\u00e9  \u00c9T\u00c9 \u00e0 Paris",
        "東京都の天気は晴れです",
    ]
    if binary:  # raw bytes, one invalid UTF-8 byte each: decoded with replacement
        array = pa.array([t if t is None else t.encode() + b"\xff" for t in texts], pa.binary())
    else:
        array = pa.array(texts, pa.string())
    batch = pa.RecordBatch.from_arrays([pa.array(range(len(texts))), array], ["doc_id", "text"])
    full = documents_columns_fn(config, with_sets=True)(batch)
    shingles, sketches = shingle_sets_fn(config)(array)
    assert shingles.equals(full.column(SHINGLES))
    assert sketches.equals(full.column(SKETCH))
    assert len(shingles[0].as_py()) > 0  # not vacuous: BASE has shingles


@pytest.mark.parametrize("large", [False, True])
def test_a_string_column_holding_invalid_utf8_is_decoded_as_binary_is(large):
    """Spark and PyArrow write a string column's bytes unchecked, so a Parquet file's text
    column can hold invalid UTF-8: the same columns as the same bytes typed binary (U+FFFD,
    the replaced bytes counted), not an Arrow error in the workers."""
    import pyarrow as pa

    from neardup_spark.batch.documents import documents_columns_fn, shingle_sets_fn
    from neardup_spark.columns import REPLACED_BYTES, SHINGLES

    config = build_config()
    raw = [BASE.encode() + b" caf\xe9 au lait", None, NEAR.encode(), b"\xff\xfe"]
    binary = pa.array(raw, pa.large_binary() if large else pa.binary())
    as_string = binary.view(pa.large_string() if large else pa.string())
    ids = pa.array(range(len(raw)))
    columns = documents_columns_fn(config, with_sets=True)
    from_binary = columns(pa.RecordBatch.from_arrays([ids, binary], ["doc_id", "text"]))
    from_string = columns(pa.RecordBatch.from_arrays([ids, as_string], ["doc_id", "text"]))
    assert from_string.equals(from_binary)
    assert from_string.column(REPLACED_BYTES).to_pylist() == [1, 0, 0, 2]
    shingles, _ = shingle_sets_fn(config)(as_string)
    assert shingles.equals(from_string.column(SHINGLES))
