"""A synthetic web-crawl-like corpus with planted near-duplicates and their exact Jaccard.

Pure Python, NumPy and PyArrow (no Spark): :func:`generate_corpus` builds the tables in memory,
:func:`write_corpus` writes them as Parquet for the ``neardup generate`` command.

The text (:mod:`~neardup_spark.quality.language`, :mod:`~neardup_spark.quality.documents`)
    Pseudo-words built from syllables (30,000 of them, one to four syllables; short words are
    the frequent ones, a few are capitalised names), drawn with Zipf's law (exponent 1.1).
    Sentences have 6-25 words, a capital first word, now and then a comma, and end in ``.``,
    ``!`` or ``?``; paragraphs of 3-8 sentences are separated by a blank line (``"\\n\\n"``).
    Document lengths are log-normal around ``mean_words`` (clipped to ``[20, 8 * mean_words]``,
    then rounded up to whole sentences). As in a real crawl, a few documents have fewer than
    five words and one (in corpora of 1,000 documents or more) is empty.

The planted near-duplicates (:mod:`~neardup_spark.quality.edits`)
    About 30 % of the documents are edited copies of a *source*: an original document drawn at
    random (a source may have several copies; a copy is never the source of another). The
    kinds, equally frequent: ``exact``, ``case_punct``, ``substitute_1``, ``substitute_3``,
    ``substitute_10``, ``insert_delete``, ``boilerplate``, ``truncate`` and ``reorder`` (the
    edits module says what each does). Originals with fewer than five words are never
    sources; only originals of three paragraphs or more are reordered.

Ids and rows
    ``doc-0000000``, ``doc-0000001``, ... zero-padded (at least 7 digits), so string order is
    numeric order. Rows are shuffled before they are numbered, so ids and row order say nothing
    about which document is a copy of which, and copies are not next to their sources.

The truth table
    One row per (source, copy) pair: ``doc_a`` and ``doc_b`` (the smaller and the larger id),
    ``kind``, and ``jaccard``, the exact Jaccard resemblance of the two documents' word
    5-shingle sets under the default normalisation, measured with the project's own kernels
    (:func:`~neardup_spark.kernels.normalize.normalize_texts`,
    :func:`~neardup_spark.kernels.shingles.shingle_sets`,
    :func:`~neardup_spark.kernels.jaccard.jaccard`). Every planted pair is listed, however
    similar the edit left it. Copies of one source are near-duplicates of each other too; the
    table lists only pairs with the source.

Same ``(n_docs, seed, mean_words)``, same tables, byte for byte.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup_spark.errors import UserError
from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import shingle_sets
from neardup_spark.quality.documents import SENTENCE_MIN, Structure, original_tokens, structure
from neardup_spark.quality.edits import EDITS, KINDS, REORDER_MIN_PARAGRAPHS
from neardup_spark.quality.language import Language, language, render

log = logging.getLogger(__name__)

COPY_FRACTION = 0.3
SHINGLE_K = 5  # words per shingle of the truth Jaccard (the job's default ngram)
SHINGLE_SEED = 42  # word-hash seed; it does not change a Jaccard
MIN_ID_DIGITS = 7
ID_PREFIX = "doc-"
BATCH_DOCS = 5000  # originals generated (and measured) per batch
MIN_SOURCE_WORDS = 5
SHORT_DOCS_PER = 500  # one document of 1-4 words per this many documents
EMPTY_DOC_MIN_CORPUS = 1000  # corpora at least this large get one empty document
DOC_MIN_WORDS = 20
DOC_MAX_FACTOR = 8
LENGTH_SIGMA = 0.5  # of log(document length)

CORPUS_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
TRUTH_SCHEMA = pa.schema(
    [
        ("doc_a", pa.string()),
        ("doc_b", pa.string()),
        ("kind", pa.string()),
        ("jaccard", pa.float64()),
    ]
)


@dataclass(frozen=True)
class Plan:
    """Who is what: originals are generation indices ``0:n_originals``, copy ``c`` is
    ``n_originals + c``; ``row_of[g]`` is the row (and id number) of generation index ``g``."""

    targets: np.ndarray  # words wanted per original
    copy_source: np.ndarray  # original index per copy
    copy_kind: np.ndarray  # index into KINDS per copy
    row_of: np.ndarray  # int64 per generation index


def _plan(rng: np.random.Generator, n_docs: int, mean_words: int) -> tuple[Plan, Structure]:
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
    st = structure(rng, targets)

    kinds = rng.permutation(np.arange(n_copies) % len(KINDS))
    eligible = np.flatnonzero(st.n_words >= MIN_SOURCE_WORDS)
    reorderable = np.flatnonzero(st.n_paragraphs >= REORDER_MIN_PARAGRAPHS)
    reorder = KINDS.index("reorder")
    if reorderable.size == 0:  # tiny documents: no source can be reordered
        kinds[kinds == reorder] = KINDS.index("exact")
    is_reorder = kinds == reorder
    sources = eligible[rng.integers(0, max(eligible.size, 1), size=n_copies)]
    sources[is_reorder] = reorderable[
        rng.integers(0, max(reorderable.size, 1), size=int(is_reorder.sum()))
    ]
    row_of = rng.permutation(n_docs)
    return Plan(targets, sources.astype(np.int64), kinds, row_of), st


def _take_chunked(chunks: list[pa.Array], starts: np.ndarray, index: np.ndarray) -> pa.Array:
    """``concat(chunks).take(index)`` without concatenating all the chunks."""
    chunk_of = np.searchsorted(starts, index, side="right") - 1
    order = np.argsort(chunk_of, kind="stable")
    parts = []
    for c in np.unique(chunk_of):
        sel = order[chunk_of[order] == c]
        parts.append(chunks[c].take(pa.array(index[sel] - starts[c])))
    gathered = pa.concat_arrays(parts) if parts else pa.array([], type=pa.string())
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return gathered.take(pa.array(inverse))


def id_width(n_docs: int) -> int:
    return max(MIN_ID_DIGITS, len(str(max(n_docs - 1, 0))))


def _ids(numbers: np.ndarray, width: int) -> list[str]:
    return [f"{ID_PREFIX}{i:0{width}d}" for i in numbers.tolist()]


def _equal_to_source(copies: pa.Array, sources: pa.Array, copy_src: np.ndarray) -> np.ndarray:
    same = pc.equal(copies, sources.take(pa.array(copy_src, type=pa.int64())))
    return np.asarray(pc.fill_null(same, False).to_numpy(zero_copy_only=False), dtype=bool)


def _measure(source_texts: pa.Array, copy_texts: pa.Array, copy_src: np.ndarray) -> np.ndarray:
    """Exact 5-shingle Jaccard of each copy with its source (``source_texts[copy_src[i]]``).

    Every text is normalised and shingled by the project's kernels, once: a copy whose text,
    raw or normalised, equals its source's uses the source's shingle set (same input, same
    kernel output).
    """
    norm_src = normalize_texts(source_texts)
    slot = copy_src.copy()  # shingle set of each copy: its source's, until shown otherwise
    differ = np.flatnonzero(~_equal_to_source(copy_texts, source_texts, copy_src))
    norm_copy = normalize_texts(copy_texts.take(pa.array(differ, type=pa.int64())))
    own = np.flatnonzero(~_equal_to_source(norm_copy, norm_src, copy_src[differ]))
    slot[differ[own]] = len(norm_src) + np.arange(own.size)
    sets = shingle_sets(
        pa.concat_arrays([norm_src, norm_copy.take(pa.array(own, type=pa.int64()))]),
        SHINGLE_K,
        SHINGLE_SEED,
    )
    return np.array(
        [jaccard(sets.doc(int(s)), sets.doc(int(t))) for s, t in zip(copy_src, slot, strict=True)],
        dtype=np.float64,
    )


def _check_args(n_docs: int, seed: int, mean_words: int) -> None:
    if n_docs < 0:
        raise UserError(f"the number of documents must be >= 0, got {n_docs}")
    if seed < 0:
        raise UserError(f"the seed must be >= 0, got {seed}")
    if mean_words < 1:
        raise UserError(f"the mean document length must be >= 1 word, got {mean_words}")


def generate_corpus(n_docs: int, seed: int = 0, mean_words: int = 500) -> tuple[pa.Table, pa.Table]:
    """Returns ``(corpus, truth)``.

    corpus columns: ``id`` (string), ``text`` (string), one row per document, in id order.
    truth columns: ``doc_a`` (string), ``doc_b`` (string), ``kind`` (string), ``jaccard``
    (float64), one row per planted (source, copy) pair, ``doc_a < doc_b``, sorted.

    >>> corpus, truth = generate_corpus(20, seed=1, mean_words=30)
    >>> corpus.num_rows, truth.num_rows, corpus.column("id")[0].as_py()
    (20, 6, 'doc-0000000')
    """
    _check_args(n_docs, seed, mean_words)
    rng = np.random.default_rng(seed)
    lang = language()
    plan, st = _plan(rng, n_docs, mean_words)
    texts = _generate_texts(rng, lang, plan, st)
    width = id_width(n_docs)
    return _corpus_table(texts, plan, width), _truth_table(plan, texts.jaccards, width)


@dataclass
class _Texts:
    """Every document's text, rendered batch by batch, and each copy's truth Jaccard."""

    chunks: list[pa.Array]  # a batch's originals, then their copies, then the next batch's
    generation: list[np.ndarray]  # generation index of each text of each chunk
    jaccards: np.ndarray  # float64 per copy


def _generate_texts(rng: np.random.Generator, lang: Language, plan: Plan, st: Structure) -> _Texts:
    """Originals in batches of :data:`BATCH_DOCS`; after each batch, the copies of its
    originals, measured against their sources while both are at hand. (The order of the draws
    from ``rng`` is what makes a seed's corpus: keep it.)"""
    n_originals = plan.targets.size
    by_source = np.argsort(plan.copy_source, kind="stable")
    sorted_sources = plan.copy_source[by_source]
    texts = _Texts([], [], np.zeros(plan.copy_source.size, dtype=np.float64))
    for lo in range(0, n_originals, BATCH_DOCS):
        hi = min(lo + BATCH_DOCS, n_originals)
        tokens = original_tokens(rng, lang, st, lo, hi)
        originals = render(lang, *tokens)
        texts.chunks.append(originals)
        texts.generation.append(np.arange(lo, hi))

        a, b = np.searchsorted(sorted_sources, [lo, hi])
        copies = by_source[a:b]
        if copies.size == 0:
            continue
        copy_texts = _render_copies(rng, lang, plan, copies, lo, tokens)
        texts.chunks.append(copy_texts)
        texts.generation.append(n_originals + copies)

        sources, copy_src = np.unique(plan.copy_source[copies] - lo, return_inverse=True)
        source_texts = originals.take(pa.array(sources))
        texts.jaccards[copies] = _measure(source_texts, copy_texts, copy_src.astype(np.int64))
    return texts


def _render_copies(
    rng: np.random.Generator,
    lang: Language,
    plan: Plan,
    copies: np.ndarray,
    lo: int,
    tokens: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> pa.Array:
    """The texts of ``copies``, each its kind's edit of its source among the originals
    ``lo:`` whose ``(words, fmt, offsets)`` are ``tokens``."""
    words, fmt, offsets = tokens
    copy_words, copy_fmt, sizes = [], [], []
    for c in copies.tolist():
        s = int(plan.copy_source[c]) - lo
        w, f = EDITS[KINDS[plan.copy_kind[c]]](
            rng, lang, words[offsets[s] : offsets[s + 1]], fmt[offsets[s] : offsets[s + 1]]
        )
        copy_words.append(w)
        copy_fmt.append(f)
        sizes.append(w.size)
    copy_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return render(lang, np.concatenate(copy_words), np.concatenate(copy_fmt), copy_offsets)


def _corpus_table(texts: _Texts, plan: Plan, width: int) -> pa.Table:
    """The corpus in id order: row ``r`` holds generation index ``gen_of_row[r]``."""
    n_docs = plan.row_of.size
    gen_order = (
        np.concatenate(texts.generation) if texts.generation else np.zeros(0, dtype=np.int64)
    )
    position = np.empty(n_docs, dtype=np.int64)
    position[gen_order] = np.arange(n_docs)
    gen_of_row = np.argsort(plan.row_of)
    starts = np.cumsum([0] + [len(c) for c in texts.chunks])[:-1]
    step = 20_000
    text_parts = [
        _take_chunked(texts.chunks, starts, position[gen_of_row[r : r + step]])
        for r in range(0, n_docs, step)
    ]
    return pa.Table.from_arrays(
        [
            pa.chunked_array([pa.array(_ids(np.arange(n_docs), width), pa.string())]),
            pa.chunked_array(text_parts, type=pa.string()),
        ],
        schema=CORPUS_SCHEMA,
    )


def _truth_table(plan: Plan, jaccards: np.ndarray, width: int) -> pa.Table:
    """One row per (source, copy) pair, the smaller id first, sorted."""
    n_originals = plan.targets.size
    source_row = plan.row_of[plan.copy_source]
    copy_row = plan.row_of[n_originals + np.arange(plan.copy_source.size)]
    row_a, row_b = np.minimum(source_row, copy_row), np.maximum(source_row, copy_row)
    order = np.lexsort((row_b, row_a))
    return pa.Table.from_arrays(
        [
            pa.array(_ids(row_a[order], width), pa.string()),
            pa.array(_ids(row_b[order], width), pa.string()),
            pa.array([KINDS[k] for k in plan.copy_kind[order].tolist()], pa.string()),
            pa.array(jaccards[order], pa.float64()),
        ],
        schema=TRUTH_SCHEMA,
    )


def generated_part(path: str, part: str) -> str:
    """``DIR`` written by :func:`write_corpus` stands for ``DIR/part`` (``corpus`` or
    ``truth``); any other path, or a URI, stands for itself."""
    if "://" not in path and os.path.isdir(os.path.join(path, part)):
        return os.path.join(path, part)
    return path


# Row groups of a few thousand documents, as crawl dumps written in blocks have: Spark can then
# split a file across tasks instead of reading 20,000 documents in one.
ROW_GROUP_ROWS = 5000


def _file_parts(table: pa.Table, rows_per_file: int) -> Iterator[pa.Table]:
    if table.num_rows == 0:
        yield table
    for start in range(0, table.num_rows, rows_per_file):
        yield table.slice(start, rows_per_file)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def write_corpus(
    directory: str,
    n_docs: int,
    seed: int = 0,
    mean_words: int = 500,
    overwrite: bool = False,
    rows_per_file: int = 20000,
) -> dict[str, Any]:
    """Write ``DIRECTORY/corpus/part-00000.parquet``, ``part-00001.parquet``, ...
    (``rows_per_file`` rows each) and ``DIRECTORY/truth/part-00000.parquet``.

    Returns a summary: ``docs``, ``truth_pairs``, ``by_kind`` (pairs per kind), ``files``
    (corpus files) and ``seconds``. An existing ``DIRECTORY/corpus`` or ``DIRECTORY/truth`` is
    a :class:`UserError` unless ``overwrite``, which removes both first (after the new corpus
    has been generated, so a failed generation leaves the old one in place).
    """
    started = time.perf_counter()
    _check_args(n_docs, seed, mean_words)
    if rows_per_file < 1:
        raise UserError(f"rows per file must be >= 1, got {rows_per_file}")
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise UserError(f"{root} exists and is not a directory")
    corpus_dir, truth_dir = root / "corpus", root / "truth"
    existing = [p for p in (corpus_dir, truth_dir) if p.exists() or p.is_symlink()]
    if existing and not overwrite:
        raise UserError(
            f"{existing[0]} already exists; pass --overwrite to replace it, or choose another "
            "directory"
        )

    corpus, truth = generate_corpus(n_docs, seed=seed, mean_words=mean_words)
    for path in existing:
        _remove(path)
    corpus_dir.mkdir(parents=True)
    truth_dir.mkdir(parents=True)
    files = 0
    for i, part in enumerate(_file_parts(corpus, rows_per_file)):
        pq.write_table(part, corpus_dir / f"part-{i:05d}.parquet", row_group_size=ROW_GROUP_ROWS)
        files += 1
    pq.write_table(truth, truth_dir / "part-00000.parquet")

    kinds = truth.column("kind").to_pylist()
    seconds = time.perf_counter() - started
    log.info("wrote %d documents and %d planted pairs in %.1f s", n_docs, len(kinds), seconds)
    return {
        "docs": n_docs,
        "truth_pairs": len(kinds),
        "by_kind": {kind: kinds.count(kind) for kind in KINDS if kind in kinds},
        "files": files,
        "seconds": round(seconds, 3),
    }
