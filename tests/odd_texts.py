"""Input rows whose counts the per-document pass tells apart, for the tests that compare its
two ways of running (Spark tasks, or this process: neardup_spark/pipeline/sketch.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

WORDS = " ".join(f"w{i}" for i in range(80))
# A null text, an empty one, a short one (fewer words than a shingle), a text shingled by
# characters, exact copies; odd_rows_table adds one with an invalid UTF-8 byte.
ODD_ROWS = [
    (9001, None),
    (9002, ""),
    (9003, "too short"),
    (9004, "重复文档检测是数据清洗中的一个重要步骤" * 3),
    (9005, WORDS),
    (9006, WORDS),
]


def odd_rows_table(
    corpus: pa.Table, ids: np.ndarray, extra: list[tuple[int, str | None]]
) -> pa.Table:
    """Rows ``ids`` of ``corpus`` under integer ids (int32 in the file, bigint to Spark) and a
    binary text column (the first text with an invalid UTF-8 byte), plus ``extra``, plus a
    column the outputs carry."""
    texts = [t.encode() for t in corpus.column("text").take(pa.array(ids)).to_pylist()]
    texts += [None if t is None else t.encode() for _, t in extra]
    texts[0] = texts[0] + b" \xff"
    return pa.table(
        {
            "id": pa.array([*ids.tolist(), *(i for i, _ in extra)], pa.int32()),
            "text": pa.array(texts, pa.binary()),
            "lang": pa.array(["en"] * (len(ids) + len(extra))),
        }
    )


def assert_odd_counts(counts: dict[str, int]) -> None:
    """The counts of a run over :data:`ODD_ROWS` and the invalid UTF-8 text."""
    assert counts["null_texts"] == 1 and counts["empty_texts"] == 1
    assert counts["short_texts"] == 1 and counts["char_shingled_texts"] == 1
    assert counts["texts_with_replaced_bytes"] == 1
