"""The plan's layout, replayed batch by batch, is the layout one ``structure`` call draws."""

from __future__ import annotations

import numpy as np
import pytest

from neardup_spark.quality.documents import structure
from neardup_spark.quality.plan import plan_layout

TARGETS = np.array([0, 3, 500, 41, 6, 7, 1200, 90, 25, 2, 800, 64, 5, 333], dtype=np.int64)


@pytest.mark.parametrize("batch_docs", [1, 3, 5, 14, 100])
def test_replayed_batches_are_the_one_call_structure(batch_docs):
    whole = structure(np.random.default_rng(9), TARGETS)
    rng = np.random.default_rng(9)
    layout = plan_layout(rng, TARGETS, batch_docs)
    # The plan drew exactly what structure() draws: the next draw is the same.
    after = np.random.default_rng(9)
    structure(after, TARGETS)
    assert rng.integers(0, 2**62) == after.integers(0, 2**62)
    assert layout.n_words.tolist() == whole.n_words.tolist()
    assert layout.n_paragraphs.tolist() == whole.n_paragraphs.tolist()
    for batch, lo in enumerate(range(0, TARGETS.size, batch_docs)):
        hi = min(lo + batch_docs, TARGETS.size)
        part = layout.batch(batch)
        s_lo, s_hi = whole.sentence_offsets[lo], whole.sentence_offsets[hi]
        assert part.sentence_lengths.tolist() == whole.sentence_lengths[s_lo:s_hi].tolist()
        assert part.paragraph_end.tolist() == whole.paragraph_end[s_lo:s_hi].tolist()
        assert (part.sentence_offsets + s_lo).tolist() == whole.sentence_offsets[
            lo : hi + 1
        ].tolist()
        assert part.n_words.tolist() == whole.n_words[lo:hi].tolist()
        # Replaying a batch twice gives it twice: the plan's states are not consumed.
        assert layout.batch(batch).sentence_lengths.tolist() == part.sentence_lengths.tolist()
