"""What the boilerplate stages do to one Arrow batch: count each unit's documents, and remove
the boilerplate units from the texts (:mod:`neardup_spark.kernels.boilerplate` underneath).

Both passes compute the same unit keys: the hash of each unit's normalised text, mixed with
the hash of the document's group (``--group-col``) when there is one. Only units of at least
``min_words`` tokens are counted and may be removed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.batch import BatchFn
from neardup_spark.batch.documents import documents_columns_fn
from neardup_spark.batch.text import decode_utf8
from neardup_spark.columns import (
    BOILERPLATE_CHARS,
    BOILERPLATE_UNITS,
    CHARS,
    DOC_ID,
    DROP_KEYS,
    EMPTIED,
    GROUP,
    KEEPER,
    TEXT,
    UNIT_DOCS,
    UNIT_KEY,
    UNITS_WITH_WORDS,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.boilerplate import (
    UNIT_HASH_SEED,
    UnitFeatures,
    first_in_document,
    in_document_lists,
    in_sorted,
    remove_units,
    unit_features,
    unit_keys,
)
from neardup_spark.kernels.compiled_words import string_hashes

# The salt of documents whose group is null (a group of their own, apart from "").
NULL_GROUP_SALT = np.uint64(0x6E756C6C67726F75)
# Characters of a unit's text kept for the report.
EXAMPLE_CHARS = 300

# What the cleaning adds to each row, in order: the output contract's two columns, then the
# helpers the run's counts are taken from.
COUNT_COLUMNS = (BOILERPLATE_UNITS, BOILERPLATE_CHARS, UNITS_WITH_WORDS, EMPTIED, CHARS)
# The texts of removed units among the set's example keys, per batch (on its first row; null
# on the others): map<int64, struct<text, group>>, the smallest per key (see _examples).
EXAMPLES = "__neardup_examples"
EXAMPLE_TYPE = pa.map_(
    pa.int64(), pa.struct([pa.field("text", pa.string()), pa.field("group", pa.string())])
)

# key -> (the unit's text, its group or None): the report's example of a top unit.
Examples = dict[int, tuple[str, str | None]]


@dataclass(frozen=True)
class BoilerplateSet:
    """The boilerplate the cleaning pass removes, as the driver found it: ``keys`` (sorted
    uint64), in repeats mode ``keepers`` (the id of the document whose first occurrence stays,
    aligned with ``keys``), and ``example_keys`` (sorted uint64: the units whose text the report
    shows)."""

    keys: np.ndarray
    keepers: pa.Array | None = None
    example_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))


@dataclass(frozen=True)
class _BatchUnits:
    texts: pa.Array  # the batch's texts, decoded
    features: UnitFeatures
    keys: np.ndarray  # uint64 per unit
    eligible: np.ndarray  # bool per unit: enough tokens to be counted and removed
    doc_of_unit: np.ndarray


def _group_salts(batch: pa.RecordBatch) -> np.ndarray | None:
    if GROUP not in batch.schema.names:
        return None
    groups = batch.column(GROUP)
    salts = string_hashes(groups, UNIT_HASH_SEED)
    if groups.null_count:
        salts[~groups.is_valid().to_numpy(zero_copy_only=False)] = NULL_GROUP_SALT
    return salts


def _batch_units(batch: pa.RecordBatch, text_col: str, config: DedupeConfig) -> _BatchUnits:
    texts, _ = decode_utf8(batch.column(text_col))
    features = unit_features(texts, config.boilerplate.unit, config.normalize, config.shingle_unit)
    doc_of_unit = features.units.doc_of_unit()
    keys = unit_keys(features.hashes, doc_of_unit, _group_salts(batch))
    eligible = features.tokens >= config.boilerplate.min_words
    return _BatchUnits(texts, features, keys, eligible, doc_of_unit)


def _order_keys(prefer: tuple[tuple[str, bool], ...]) -> list[tuple[str, str]]:
    keys = [(name, "descending" if desc else "ascending") for name, desc in prefer]
    return [*keys, (DOC_ID, "ascending")]


def unit_counts_fn(
    config: DedupeConfig, prefer_columns: tuple[str, ...] = ()
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """One batch of ``doc_id``, ``text`` (string or binary), optionally ``__neardup_group`` and
    the ``prefer_columns`` -> one row per distinct unit key of the batch: ``unit_key`` (int64),
    ``unit_docs`` (documents of the batch holding it); in repeats mode also ``keeper`` (the
    first of those documents in the prefer order, then by id) and its ``prefer_columns``.
    Counting within the batch first keeps what Spark aggregates small."""
    repeats = config.boilerplate.mode == "repeats"
    prefer = tuple(
        (name, desc)
        for name, (_, desc) in zip(prefer_columns, config.boilerplate.prefer_order, strict=True)
    )

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        units = _batch_units(batch, "text", config)
        first = first_in_document(units.features.units, units.keys, units.eligible)
        docs, keys = units.doc_of_unit[first], units.keys[first]
        if not repeats:
            distinct, counts = np.unique(keys, return_counts=True)
            return pa.RecordBatch.from_arrays(
                [pa.array(distinct.view(np.int64)), pa.array(counts.astype(np.int64))],
                names=[UNIT_KEY, UNIT_DOCS],
            )
        table = pa.Table.from_batches([batch])
        # Nulls last is pyarrow's default (naming it is deprecated from pyarrow 25 on).
        order = pc.sort_indices(table, sort_keys=_order_keys(prefer)).to_numpy()
        rank = np.empty(batch.num_rows, dtype=np.int64)
        rank[order] = np.arange(batch.num_rows)
        by_key = np.lexsort((rank[docs], keys))
        keys, docs = keys[by_key], docs[by_key]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))[: keys.size]
        counts = np.diff(np.append(starts, keys.size))
        keeper_rows = pa.array(docs[starts])
        columns = [pa.array(keys[starts].view(np.int64)), pa.array(counts.astype(np.int64))]
        columns += [batch.column(DOC_ID).take(keeper_rows)]
        columns += [batch.column(name).take(keeper_rows) for name, _ in prefer]
        names = [UNIT_KEY, UNIT_DOCS, KEEPER, *(name for name, _ in prefer)]
        return pa.RecordBatch.from_arrays(columns, names=names)

    return run


def document_unit_keys_fn(config: DedupeConfig) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """One batch of ``doc_id``, ``text``, optionally ``__neardup_group`` -> ``doc_id``,
    ``unit_key``: each document's distinct countable unit keys (for joining a boilerplate set
    too large to broadcast)."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        units = _batch_units(batch, "text", config)
        first = first_in_document(units.features.units, units.keys, units.eligible)
        rows = pa.array(units.doc_of_unit[first])
        return pa.RecordBatch.from_arrays(
            [batch.column(DOC_ID).take(rows), pa.array(units.keys[first].view(np.int64))],
            names=[DOC_ID, UNIT_KEY],
        )

    return run


def _removed(
    units: _BatchUnits,
    batch: pa.RecordBatch,
    id_col: str,
    repeats: bool,
    boilerplate: BoilerplateSet,
) -> np.ndarray:
    """Which unit occurrences go: those listed in the document's ``drop_keys`` (the joined
    path, when the batch has that column), or those in the broadcast set (in repeats mode,
    unless this is the keeper's document); in repeats mode also every repeat of a unit within
    its document."""
    eligible = units.eligible
    if DROP_KEYS in batch.schema.names:
        offsets, values = _drop_lists(batch.column(DROP_KEYS))
        listed = in_document_lists(units.features.units, units.keys, eligible, offsets, values)
    else:
        listed = eligible.copy()
        picked = np.flatnonzero(eligible)
        found = in_sorted(units.keys[picked], boilerplate.keys)
        listed[picked] = found
        if repeats and boilerplate.keepers is not None:
            hits = picked[found]
            at = np.searchsorted(boilerplate.keys, units.keys[hits])
            keeper = boilerplate.keepers.take(pa.array(at))
            own = batch.column(id_col).take(pa.array(units.doc_of_unit[hits]))
            listed[hits] = pc.fill_null(pc.not_equal(keeper, own), True).to_numpy(
                zero_copy_only=False
            )
    if repeats:
        return listed | (eligible & ~first_in_document(units.features.units, units.keys, eligible))
    return listed


def _drop_lists(lists: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A nullable list<int64> column as CSR ``(offsets, uint64 values)``; null is empty."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    sizes = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    values = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    return offsets, values.view(np.uint64)


def _examples(
    units: _BatchUnits, removed: np.ndarray, batch: pa.RecordBatch, wanted: np.ndarray
) -> Examples:
    """For the removed units among ``wanted`` keys: the smallest text seen per key (trimmed,
    cut to :data:`EXAMPLE_CHARS`) and its group, so the report's examples do not depend on
    the partitioning."""
    if wanted.size == 0:
        return {}
    hits = np.flatnonzero(removed)
    hits = hits[in_sorted(units.keys[hits], wanted)]
    if hits.size == 0:
        return {}
    texts = units.features.units.texts().take(pa.array(hits))
    texts = pc.utf8_slice_codeunits(pc.utf8_trim_whitespace(texts), 0, EXAMPLE_CHARS)
    columns = {"key": pa.array(units.keys[hits].view(np.int64)), "text": texts.cast(pa.string())}
    if GROUP in batch.schema.names:
        columns["group"] = batch.column(GROUP).take(pa.array(units.doc_of_unit[hits]))
    aggregates = [("text", "min")] + ([("group", "min")] if "group" in columns else [])
    found = pa.table(columns).group_by("key").aggregate(aggregates).to_pylist()
    return {
        int(row["key"]): (row["text_min"], row.get("group_min") if "group" in columns else None)
        for row in found
    }


def examples_column(examples: Examples, rows: int) -> pa.Array:
    """:data:`EXAMPLES` for a batch of ``rows`` rows: ``examples`` on the first, null after."""
    first = [(key, {"text": text, "group": group}) for key, (text, group) in examples.items()]
    values = [first if first else None] + [None] * (rows - 1) if rows else []
    return pa.array(values, type=EXAMPLE_TYPE)


def strip_columns_fn(
    config: DedupeConfig,
    text_col: str,
    id_col: str,
    boilerplate: Callable[[], BoilerplateSet],
    with_examples: bool = False,
    keep_emptied: bool = False,
) -> BatchFn:
    """One batch of input rows (any columns, with ``text_col`` and ``id_col``; optionally
    ``__neardup_group`` and ``__neardup_drop_keys``, each document's own keys to remove, which
    then replace the broadcast set's) -> the same rows
    and columns, helpers dropped, the text cleaned (same type; binary stays binary), then
    ``boilerplate_units`` and ``boilerplate_chars`` (int32 / int64 removed), ``__neardup_units``
    (units with words before), ``__neardup_emptied`` and ``__neardup_chars`` (characters
    before): :data:`COUNT_COLUMNS`.

    ``boilerplate`` returns the set on the executor; ``with_examples`` adds :data:`EXAMPLES`
    last (the text of removed units among the set's ``example_keys``); ``keep_emptied`` gives a
    text that was all boilerplate back whole (still counted emptied).
    """
    repeats = config.boilerplate.mode == "repeats"
    helpers = {GROUP, DROP_KEYS, *COUNT_COLUMNS}

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        found = boilerplate()
        units = _batch_units(batch, text_col, config)
        remove = _removed(units, batch, id_col, repeats, found)
        stripped = remove_units(units.features, remove)
        original = batch.column(text_col)
        text = stripped.texts
        if keep_emptied and stripped.emptied.any():
            whole = units.texts.cast(pa.large_string())
            text = pc.if_else(pa.array(stripped.emptied), whole, text)
        text = text.cast(pa.string())
        if pa.types.is_binary(original.type) or pa.types.is_large_binary(original.type):
            text = text.cast(original.type)
        names = [n for n in batch.schema.names if n not in helpers]
        columns = [text if n == text_col else batch.column(n) for n in names]
        units_with_words = np.bincount(
            units.doc_of_unit, weights=units.features.tokens > 0, minlength=batch.num_rows
        )
        chars = pc.fill_null(pc.utf8_length(units.texts), 0).cast(pa.int64())
        columns += [
            pa.array(stripped.removed_units),
            pa.array(stripped.removed_chars),
            pa.array(units_with_words.astype(np.int32)),
            pa.array(stripped.emptied),
            chars,
        ]
        names += [*COUNT_COLUMNS]
        if with_examples:
            examples = _examples(units, remove, batch, found.example_keys)
            columns.append(examples_column(examples, batch.num_rows))
            names.append(EXAMPLES)
        return pa.RecordBatch.from_arrays(columns, names=names)

    return run


def cleaned_features_fn(
    config: DedupeConfig,
    boilerplate: Callable[[], BoilerplateSet],
    with_examples: bool = False,
    before_batch: Callable[[], None] | None = None,
) -> BatchFn:
    """``dedupe --strip-boilerplate``'s per-document pass in one function: one batch of
    ``doc_id``, ``text``, optionally ``__neardup_group`` / ``__neardup_drop_keys`` -> the
    columns of :func:`~neardup_spark.batch.documents.documents_columns_fn` (without the shingle
    sets) computed on the cleaned texts, then :data:`COUNT_COLUMNS` (and :data:`EXAMPLES` with
    ``with_examples``). A text that was all boilerplate is fingerprinted whole.
    ``before_batch`` runs first (the fault hook)."""
    strip = strip_columns_fn(config, TEXT, DOC_ID, boilerplate, with_examples, keep_emptied=True)
    carried = [*COUNT_COLUMNS, *((EXAMPLES,) if with_examples else ())]
    features = documents_columns_fn(config, with_sets=False)

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        if before_batch is not None:
            before_batch()
        cleaned = strip(batch)
        docs = pa.RecordBatch.from_arrays(
            [cleaned.column(DOC_ID), cleaned.column(TEXT)], names=[DOC_ID, TEXT]
        )
        out = features(docs)
        return pa.RecordBatch.from_arrays(
            [*out.columns, *(cleaned.column(n) for n in carried)],
            names=[*out.schema.names, *carried],
        )

    return run
