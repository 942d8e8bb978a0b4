"""A synthetic web-crawl-like corpus with planted near-duplicates and their exact Jaccard.

Pure Python, NumPy and PyArrow (no Spark): :func:`generate_corpus` builds the tables in memory
(small corpora, tests); :func:`write_corpus` streams them to Parquet for the ``neardup generate``
command, in memory that does not grow with the texts: the plan (:mod:`~neardup_spark.quality.plan`,
~60 bytes a document) is drawn first, then each batch of originals and their copies is made,
measured and spilled to disk by destination file (:mod:`~neardup_spark.quality.spill`), and the
files are written in row order from the spill. Both give the same corpus.

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
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.ownership import claim_to_replace, write_ownership
from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import shingle_sets
from neardup_spark.quality.documents import original_tokens
from neardup_spark.quality.edits import EDITS, KINDS
from neardup_spark.quality.language import Language, language, render
from neardup_spark.quality.plan import Plan, plan_corpus
from neardup_spark.quality.spill import RowOrderSpill, take_chunked

log = logging.getLogger(__name__)
progress = logging.getLogger("neardup_spark.progress")

SHINGLE_K = 5  # words per shingle of the truth Jaccard (the job's default ngram)
SHINGLE_SEED = 42  # word-hash seed; it does not change a Jaccard
MIN_ID_DIGITS = 7
ID_PREFIX = "doc-"
BATCH_DOCS = 5000  # originals generated (and measured) per batch
# Truth rows per Parquet row group (pyarrow's default): the streamed truth file is then the one
# ``pq.write_table`` writes for the whole table.
TRUTH_ROW_GROUP_ROWS = 1024 * 1024

CORPUS_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
TRUTH_SCHEMA = pa.schema(
    [
        ("doc_a", pa.string()),
        ("doc_b", pa.string()),
        ("kind", pa.string()),
        ("jaccard", pa.float64()),
    ]
)


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
    """Returns ``(corpus, truth)``, in memory (:func:`write_corpus` streams the same tables).

    corpus columns: ``id`` (string), ``text`` (string), one row per document, in id order.
    truth columns: ``doc_a`` (string), ``doc_b`` (string), ``kind`` (string), ``jaccard``
    (float64), one row per planted (source, copy) pair, ``doc_a < doc_b``, sorted.

    >>> corpus, truth = generate_corpus(20, seed=1, mean_words=30)
    >>> corpus.num_rows, truth.num_rows, corpus.column("id")[0].as_py()
    (20, 6, 'doc-0000000')
    """
    _check_args(n_docs, seed, mean_words)
    batches = TextBatches(n_docs, seed, mean_words)
    chunks, generation = [], []
    for gen, texts in batches:
        chunks.append(texts)
        generation.append(gen)
    width = id_width(n_docs)
    corpus = _corpus_table(chunks, generation, batches.plan, width)
    truth_parts = list(truth_tables(batches.plan, batches.jaccards, width))
    return corpus, pa.concat_tables(truth_parts) if truth_parts else TRUTH_SCHEMA.empty_table()


class TextBatches:
    """Every document's text, batch by batch: iterating yields ``(generation indices, texts)``
    for a batch of :data:`BATCH_DOCS` originals, then the copies of those originals, measured
    against their sources while both are at hand (:attr:`jaccards`, filled as the copies are
    made). (The order of the draws from the seed's generator is what makes a seed's corpus:
    keep it.)"""

    def __init__(self, n_docs: int, seed: int, mean_words: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.lang = language()
        self.plan = plan_corpus(self.rng, n_docs, mean_words, BATCH_DOCS)
        self.jaccards = np.zeros(self.plan.copy_source.size, dtype=np.float64)

    def __iter__(self) -> Iterator[tuple[np.ndarray, pa.Array]]:
        plan, rng, lang = self.plan, self.rng, self.lang
        n_originals = plan.n_originals
        by_source = np.argsort(plan.copy_source, kind="stable")
        sorted_sources = plan.copy_source[by_source]
        for batch, lo in enumerate(range(0, n_originals, BATCH_DOCS)):
            hi = min(lo + BATCH_DOCS, n_originals)
            tokens = original_tokens(rng, lang, plan.layout.batch(batch), 0, hi - lo)
            originals = render(lang, *tokens)
            yield np.arange(lo, hi), originals

            a, b = np.searchsorted(sorted_sources, [lo, hi])
            copies = by_source[a:b]
            if copies.size == 0:
                continue
            copy_texts = _render_copies(rng, lang, plan, copies, lo, tokens)
            sources, copy_src = np.unique(plan.copy_source[copies] - lo, return_inverse=True)
            source_texts = originals.take(pa.array(sources))
            self.jaccards[copies] = _measure(source_texts, copy_texts, copy_src.astype(np.int64))
            yield n_originals + copies, copy_texts


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


def _corpus_table(
    chunks: list[pa.Array], generation: list[np.ndarray], plan: Plan, width: int
) -> pa.Table:
    """The corpus in id order: row ``r`` holds generation index ``gen_of_row[r]``."""
    n_docs = plan.row_of.size
    gen_order = np.concatenate(generation) if generation else np.zeros(0, dtype=np.int64)
    position = np.empty(n_docs, dtype=np.int64)
    position[gen_order] = np.arange(n_docs)
    gen_of_row = np.argsort(plan.row_of)
    starts = np.cumsum([0] + [len(c) for c in chunks])[:-1]
    step = 20_000
    text_parts = [
        take_chunked(chunks, starts, position[gen_of_row[r : r + step]])
        for r in range(0, n_docs, step)
    ]
    return pa.Table.from_arrays(
        [
            pa.chunked_array([pa.array(_ids(np.arange(n_docs), width), pa.string())]),
            pa.chunked_array(text_parts, type=pa.string()),
        ],
        schema=CORPUS_SCHEMA,
    )


def truth_tables(plan: Plan, jaccards: np.ndarray, width: int) -> Iterator[pa.Table]:
    """The truth table, one row per (source, copy) pair, the smaller id first, sorted, in parts
    of :data:`TRUTH_ROW_GROUP_ROWS` rows (ids are made one part at a time)."""
    n_originals = plan.n_originals
    source_row = plan.row_of[plan.copy_source]
    copy_row = plan.row_of[n_originals + np.arange(plan.copy_source.size)]
    row_a, row_b = np.minimum(source_row, copy_row), np.maximum(source_row, copy_row)
    order = np.lexsort((row_b, row_a))
    for lo in range(0, order.size, TRUTH_ROW_GROUP_ROWS):
        part = order[lo : lo + TRUTH_ROW_GROUP_ROWS]
        yield pa.Table.from_arrays(
            [
                pa.array(_ids(row_a[part], width), pa.string()),
                pa.array(_ids(row_b[part], width), pa.string()),
                pa.array([KINDS[k] for k in plan.copy_kind[part].tolist()], pa.string()),
                pa.array(jaccards[part], pa.float64()),
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
# Progress lines while a corpus is written (about one per this fraction of the documents).
PROGRESS_STEP = 0.05


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def written_by_generate(rel: str) -> bool:
    """A file an earlier version of ``neardup generate`` wrote (``corpus/part-00000.parquet``):
    what a DIRECTORY without the ownership record proves the job wrote."""
    return re.fullmatch(r"(corpus|truth|lines)/part-\d{5}\.parquet", rel) is not None


def write_corpus(
    directory: str,
    n_docs: int,
    seed: int = 0,
    mean_words: int = 500,
    overwrite: bool = False,
    rows_per_file: int = 20000,
) -> dict[str, Any]:
    """Write ``DIRECTORY/corpus/part-00000.parquet``, ``part-00001.parquet``, ...
    (``rows_per_file`` rows each) and ``DIRECTORY/truth/part-00000.parquet``: the tables of
    :func:`generate_corpus`, streamed (texts spilled to ``DIRECTORY/.spill-*`` by destination
    file while they are made, then written in row order).

    Returns a summary: ``docs``, ``truth_pairs``, ``by_kind`` (pairs per kind), ``files``
    (corpus files) and ``seconds``. An existing ``DIRECTORY/corpus`` or ``DIRECTORY/truth`` is
    a :class:`UserError` unless ``overwrite``, which replaces both once the new corpus is
    written (into ``DIRECTORY/.corpus-*`` and ``.truth-*``, so a failed generation leaves the
    old one in place).
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
    storage = LocalStorage()
    names = ("corpus", "truth")
    record = claim_to_replace(storage, str(root), names, "generate", written_by_generate)
    nonce = uuid.uuid4().hex[:12]
    partial = {corpus_dir: root / f".corpus-{nonce}", truth_dir: root / f".truth-{nonce}"}
    scratch = [*partial.values(), root / f".spill-{nonce}"]
    record.dirs |= {p.name for p in scratch}
    write_ownership(storage, str(root), record)
    try:
        batches = TextBatches(n_docs, seed, mean_words)
        files = _write_texts(batches, n_docs, partial[corpus_dir], scratch[-1], rows_per_file)
        _write_truth(batches, n_docs, partial[truth_dir] / "part-00000.parquet")
        record.files |= {
            f"{final.name}/{p.name}"
            for final, written in partial.items()
            for p in written.iterdir()
        }
        write_ownership(storage, str(root), record)  # listed before they are moved in
        for path in existing:
            _remove(path)
        for final, written in partial.items():
            written.rename(final)
    finally:
        for written in partial.values():
            _remove(written)
    record.files = {f for f in record.files if (root / f).is_file()}
    record.dirs -= {p.name for p in scratch}
    write_ownership(storage, str(root), record)

    kinds = np.bincount(batches.plan.copy_kind, minlength=len(KINDS))
    seconds = time.perf_counter() - started
    log.info("wrote %d documents and %d planted pairs in %.1f s", n_docs, kinds.sum(), seconds)
    return {
        "docs": n_docs,
        "truth_pairs": int(kinds.sum()),
        "by_kind": {kind: int(n) for kind, n in zip(KINDS, kinds.tolist(), strict=True) if n},
        "files": files,
        "seconds": round(seconds, 3),
    }


def _write_texts(
    batches: TextBatches, n_docs: int, corpus_dir: Path, spill_dir: Path, rows_per_file: int
) -> int:
    """Make every text, spill it by destination file, then write the corpus files in row
    order; returns the number of files."""
    corpus_dir.mkdir(parents=True)
    step = max(1, int(n_docs * PROGRESS_STEP))
    made = 0
    with RowOrderSpill(spill_dir, n_docs, rows_per_file) as spill:
        for gen, texts in batches:
            spill.add(batches.plan.row_of[gen], texts)
            if (made + gen.size) // step > made // step:
                progress.info("generate: %d of %d documents made", made + gen.size, n_docs)
            made += gen.size
        width = id_width(n_docs)
        files = 0
        for index, first, texts in spill.files():
            ids = pa.array(_ids(np.arange(first, first + len(texts)), width), pa.string())
            table = pa.Table.from_arrays([ids, texts], schema=CORPUS_SCHEMA)
            pq.write_table(
                table, corpus_dir / f"part-{index:05d}.parquet", row_group_size=ROW_GROUP_ROWS
            )
            files += 1
    progress.info("generate: %d corpus files written", files)
    return files


def _write_truth(batches: TextBatches, n_docs: int, path: Path) -> None:
    """The truth table (its Jaccards measured while the texts were made), part by part."""
    path.parent.mkdir(parents=True)
    with pq.ParquetWriter(path, TRUTH_SCHEMA) as writer:
        for part in truth_tables(batches.plan, batches.jaccards, id_width(n_docs)):
            writer.write_table(part)
