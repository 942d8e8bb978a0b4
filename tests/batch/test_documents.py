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
