"""Each planted edit on one source document, rendered: the copy differs as its kind promises."""

from __future__ import annotations

import numpy as np
import pytest

from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.quality.documents import original_tokens, structure
from neardup_spark.quality.edits import (
    EDITS,
    KINDS,
    SUBSTITUTE_RATES,
    TRUNCATE_RANGE,
)
from neardup_spark.quality.language import (
    BOILERPLATE_FOOTERS,
    BOILERPLATE_HEADERS,
    language,
    render,
)

SEEDS = range(6)


def source(seed: int, words: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """One original of about ``words`` words (several paragraphs) as tokens."""
    rng = np.random.default_rng(100 + seed)
    st = structure(rng, np.array([words], dtype=np.int64))
    w, f, _ = original_tokens(rng, language(), st, 0, 1)
    return w, f


def text(tokens: tuple[np.ndarray, np.ndarray]) -> str:
    w, f = tokens
    return render(language(), w, f, np.array([0, w.size])).to_pylist()[0]


def edited(kind: str, seed: int) -> tuple[str, str]:
    w, f = source(seed)
    copy = EDITS[kind](np.random.default_rng(seed), language(), w.copy(), f.copy())
    return text((w, f)), text(copy)


def test_every_kind_has_its_edit_in_order():
    assert tuple(EDITS) == KINDS


@pytest.mark.parametrize("seed", SEEDS)
def test_exact_and_case_punct_keep_the_normalised_text(seed):
    original, copy = edited("exact", seed)
    assert copy == original
    original, copy = edited("case_punct", seed)
    assert copy != original
    assert normalize_text(copy) == normalize_text(original)


@pytest.mark.parametrize("kind", sorted(SUBSTITUTE_RATES))
@pytest.mark.parametrize("seed", SEEDS)
def test_substitutions_replace_that_share_of_the_words(kind, seed):
    original, copy = edited(kind, seed)
    a, b = original.split(), copy.split()
    assert len(a) == len(b)
    changed = sum(x != y for x, y in zip(a, b, strict=True))
    assert changed == max(1, round(SUBSTITUTE_RATES[kind] * len(a)))


@pytest.mark.parametrize("seed", SEEDS)
def test_insert_delete_keeps_length_sentences_and_paragraphs(seed):
    original, copy = edited("insert_delete", seed)
    assert copy != original
    assert len(copy.split()) == len(original.split())
    keep = "".join(c for c in original if c in ".!?\n")
    assert "".join(c for c in copy if c in ".!?\n") == keep


@pytest.mark.parametrize("seed", SEEDS)
def test_boilerplate_wraps_the_text(seed):
    original, copy = edited("boilerplate", seed)
    header, body, footer = copy.split("\n\n")[0], copy.split("\n\n")[1:-1], copy.split("\n\n")[-1]
    assert header in BOILERPLATE_HEADERS and footer in BOILERPLATE_FOOTERS
    assert "\n\n".join(body) == original


@pytest.mark.parametrize("seed", SEEDS)
def test_truncate_drops_the_end_and_says_so(seed):
    original, copy = edited("truncate", seed)
    assert copy.endswith("...")
    words, kept = original.split(), copy.split()
    assert normalize_text(original).startswith(normalize_text(copy))
    lo, hi = TRUNCATE_RANGE
    dropped = len(words) - len(kept)
    assert round(lo * len(words)) - 1 <= dropped <= round(hi * len(words)) + 1


@pytest.mark.parametrize("seed", SEEDS)
def test_reorder_shuffles_whole_paragraphs(seed):
    original, copy = edited("reorder", seed)
    paragraphs = original.split("\n\n")
    assert len(paragraphs) >= 3
    assert copy.split("\n\n") != paragraphs
    assert sorted(copy.split("\n\n")) == sorted(paragraphs)
