"""The plan of a generated corpus: who is an original, who copies whom with which edit, which
row each document lands on, and the sentence and paragraph layout of every original.

The plan is drawn first, from the corpus seed, in a fixed order (lengths, short documents,
sentences, paragraphs, copy kinds, sources, rows); the texts come after it, batch by batch
(:mod:`~neardup_spark.quality.generate`). The layout of ten million originals holds ~250
million sentences, too many to keep: :class:`Layout` keeps the generator's state at the start
of each batch instead, and replays a batch's sentences and paragraphs when its texts are made.
Both halves of :func:`~neardup_spark.quality.documents.structure` draw document after document,
so the replayed layout is, draw for draw, the one a single call makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup_spark.quality.documents import (
    SENTENCE_MIN,
    Structure,
    layout_structure,
    paragraph_layout,
    sentence_layout,
)
from neardup_spark.quality.edits import KINDS, REORDER_MIN_PARAGRAPHS

COPY_FRACTION = 0.3
MIN_SOURCE_WORDS = 5
SHORT_DOCS_PER = 500  # one document of 1-4 words per this many documents
EMPTY_DOC_MIN_CORPUS = 1000  # corpora at least this large get one empty document
DOC_MIN_WORDS = 20
DOC_MAX_FACTOR = 8
LENGTH_SIGMA = 0.5  # of log(document length)


@dataclass(frozen=True)
class Layout:
    """Sentences and paragraphs of the originals, batch by batch of ``batch_docs``.

    Per document it keeps only what the plan reads (words, paragraphs); a batch's full
    :class:`~neardup_spark.quality.documents.Structure` is replayed by :meth:`batch`."""

    batch_docs: int
    targets: np.ndarray  # words wanted per original
    sentence_states: list[Mapping[str, Any]]  # bit generator state before each batch's sentences
    paragraph_states: list[Mapping[str, Any]]  # ... before each batch's paragraphs
    n_words: np.ndarray  # int32 per original
    n_paragraphs: np.ndarray  # int32 per original

    def batch(self, index: int) -> Structure:
        """The structure of originals ``index * batch_docs`` up to the next batch, indexed
        from 0, as :func:`~neardup_spark.quality.documents.structure` lays them out."""
        lo = index * self.batch_docs
        targets = self.targets[lo : lo + self.batch_docs]
        replay = np.random.Generator(_bit_generator(self.sentence_states[index]))
        lengths, per_doc = sentence_layout(replay, targets)
        replay.bit_generator.state = self.paragraph_states[index]
        paragraph_end, n_paragraphs = paragraph_layout(replay, per_doc)
        return layout_structure(lengths, per_doc, paragraph_end, n_paragraphs)


def _bit_generator(state: Mapping[str, Any]) -> np.random.BitGenerator:
    bit_generator: np.random.BitGenerator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return bit_generator


def plan_layout(rng: np.random.Generator, targets: np.ndarray, batch_docs: int) -> Layout:
    """Draw every original's sentences, then every original's paragraphs (the draws of
    ``structure(rng, targets)``), keeping the state at each batch's start."""
    starts = range(0, targets.size, batch_docs)
    sentence_states, per_doc_parts, n_words_parts = [], [], []
    for lo in starts:
        sentence_states.append(rng.bit_generator.state)
        lengths, per_doc = sentence_layout(rng, targets[lo : lo + batch_docs])
        doc_of_sentence = np.repeat(np.arange(per_doc.size), per_doc)
        n_words_parts.append(np.bincount(doc_of_sentence, lengths, per_doc.size).astype(np.int32))
        per_doc_parts.append(per_doc.astype(np.int32))
    paragraph_states, n_paragraphs_parts = [], []
    for per_doc in per_doc_parts:
        paragraph_states.append(rng.bit_generator.state)
        _, n_paragraphs = paragraph_layout(rng, per_doc.astype(np.int64))
        n_paragraphs_parts.append(n_paragraphs.astype(np.int32))
    empty = np.zeros(0, dtype=np.int32)
    return Layout(
        batch_docs=batch_docs,
        targets=targets,
        sentence_states=sentence_states,
        paragraph_states=paragraph_states,
        n_words=np.concatenate(n_words_parts) if n_words_parts else empty,
        n_paragraphs=np.concatenate(n_paragraphs_parts) if n_paragraphs_parts else empty,
    )


@dataclass(frozen=True)
class Plan:
    """Who is what: originals are generation indices ``0:n_originals``, copy ``c`` is
    ``n_originals + c``; ``row_of[g]`` is the row (and id number) of generation index ``g``."""

    layout: Layout
    copy_source: np.ndarray  # original index per copy
    copy_kind: np.ndarray  # index into KINDS per copy
    row_of: np.ndarray  # int64 per generation index

    @property
    def n_originals(self) -> int:
        return int(self.layout.targets.size)


def plan_corpus(rng: np.random.Generator, n_docs: int, mean_words: int, batch_docs: int) -> Plan:
    """The plan of ``n_docs`` documents of about ``mean_words`` words (originals in batches of
    ``batch_docs``); the draws from ``rng`` happen in the order that makes a seed's corpus."""
    n_degenerate = n_docs // SHORT_DOCS_PER + (n_docs >= EMPTY_DOC_MIN_CORPUS)
    n_copies = round(COPY_FRACTION * n_docs) if n_docs - n_degenerate >= 2 else 0
    n_originals = n_docs - n_copies
    lo = max(SENTENCE_MIN, min(DOC_MIN_WORDS, mean_words))
    hi = max(lo, DOC_MAX_FACTOR * mean_words)
    mu = np.log(mean_words) - LENGTH_SIGMA**2 / 2
    targets = np.clip(np.rint(rng.lognormal(mu, LENGTH_SIGMA, n_originals)), lo, hi)
    targets = targets.astype(np.int64)
    degenerate = rng.choice(n_originals, size=n_degenerate, replace=False)
    targets[degenerate] = rng.integers(1, MIN_SOURCE_WORDS, size=n_degenerate)
    if n_docs >= EMPTY_DOC_MIN_CORPUS:
        targets[degenerate[0]] = 0
    layout = plan_layout(rng, targets, batch_docs)

    kinds = rng.permutation(np.arange(n_copies) % len(KINDS))
    eligible = np.flatnonzero(layout.n_words >= MIN_SOURCE_WORDS)
    reorderable = np.flatnonzero(layout.n_paragraphs >= REORDER_MIN_PARAGRAPHS)
    reorder = KINDS.index("reorder")
    if reorderable.size == 0:  # tiny documents: no source can be reordered
        kinds[kinds == reorder] = KINDS.index("exact")
    is_reorder = kinds == reorder
    sources = eligible[rng.integers(0, max(eligible.size, 1), size=n_copies)]
    sources[is_reorder] = reorderable[
        rng.integers(0, max(reorderable.size, 1), size=int(is_reorder.sum()))
    ]
    row_of = rng.permutation(n_docs)
    return Plan(layout, sources.astype(np.int64), kinds, row_of)
