"""The pairs step: the per-document table -> the ``pairs/`` rows, exact copies and verified
near-duplicates. Two implementations, the same pairs (tested against each other); the plan
(:func:`~neardup_spark.pipeline.plan.decide_pairs`) picks one:

* ``driver`` (:mod:`.driver_pairs`): on Arrow tables in this process, for small runs;
* ``spark`` (here): Spark stages, each kept in the run's stage results and resumed: exact
  copies collapsed to their group's smallest id, LSH candidates from the band keys, and
  verification, its texts read where the plan says
  (:func:`~neardup_spark.pipeline.plan.decide_verify_texts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark.batch.bucket_kept import COMPARISONS, SKIPPED
from neardup_spark.columns import BAND_KEY, DOC_A, DOC_B, DOC_ID, HAMMING
from neardup_spark.pipeline.addressed_input import AddressedInput
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.driver_pairs import DriverTables, driver_pair_parts
from neardup_spark.pipeline.execution import (
    candidate_partitions,
    maybe_broadcast,
    shuffle_partitions,
    shuffle_partitions_at_least,
    verify_partitions,
)
from neardup_spark.pipeline.plan import DRIVER, decide_pairs, decide_verify_texts
from neardup_spark.pipeline.reporting import record_bucket_comparisons
from neardup_spark.pipeline.sketch import SketchedHere
from neardup_spark.stages.candidates import (
    banded_candidate_pairs,
    banded_pairs_and_members,
    bucket_kept_candidates,
    member_sketches,
)
from neardup_spark.stages.clusters import exact_pairs, minhash_pairs, simhash_pairs
from neardup_spark.stages.exact_copies import exact_copy_edges
from neardup_spark.stages.verify import (
    hamming_scored,
    score_candidate_texts,
    scored_side_texts,
    side_requests,
    verified,
)

MEMORY = StorageLevel.MEMORY_AND_DISK
PAIR_STAGES = ("exact", "candidates", "verify")
# The anchored rule's counts of its large buckets (pipeline/reporting.py).
BUCKET_COUNTS = ("bucket_comparisons", "bucket_comparisons_skipped")
# The texts of a run's documents: a DataFrame (``doc_id``, ``text``), or a function of the
# candidates and whether to broadcast them giving those (the boilerplate step's cleaned texts).
Texts = DataFrame | Callable[[DataFrame, bool], DataFrame]


def verified_edges(
    ctx: RunContext,
    features: DataFrame,
    texts: Texts,
    addressed: AddressedInput | None = None,
    here: SketchedHere | None = None,
) -> tuple[DataFrame, DriverTables | None]:
    """Exact-copy edges and verified near-duplicate pairs of the per-document table -> the
    ``pairs/`` rows, counted in ``ctx.counts``, and the run's
    :class:`~neardup_spark.pipeline.driver_pairs.DriverTables` when they were found here, else
    None. ``addressed``: the input with addresses; ``here``: the per-document pass done in this
    process."""
    sketch = ctx.plan.choices["sketch"]
    choice = ctx.plan.record(decide_pairs(ctx.facts, ctx.settings, ctx.counts, sketch))
    counts, driver = ctx.counts, None
    if choice.where == DRIVER:
        pair_parts, driver = driver_pair_parts(ctx, features, texts, here)
        ctx.timer.on_driver += [stage for stage in PAIR_STAGES if stage in ctx.timer.seconds]
    else:
        exact, unique_docs = exact_copy_pairs(ctx, features)
        pair_parts = [exact] if exact is not None else []
        counts["candidate_pairs"] = counts["near_pairs"] = 0
        if ctx.config.method != "exact":
            pair_parts.append(near_duplicate_pairs(ctx, features, texts, unique_docs, addressed))
    # Exact-copy edges join a copy to its group's smallest id, near edges join unique texts:
    # the two sets are disjoint, so no job is needed to count their union.
    counts["verified_pairs"] = counts["exact_copies"] + counts["near_pairs"]
    return union_pairs(pair_parts), driver


def kept_stage(
    ctx: RunContext,
    stage: str,
    build: Callable[[], DataFrame],
    level: StorageLevel = MEMORY,
    run_counts: tuple[str, ...] = (),
) -> tuple[DataFrame, int]:
    """``stage``'s result and its rows: read back when an earlier run finished it, else built,
    kept and counted (timed as ``stage``), and marked finished. ``run_counts``: the counts of
    ``ctx.counts`` that ``build`` sets, kept with the stage and restored when it is resumed."""
    done = ctx.results.finished(stage)
    if done is not None:
        ctx.counts.update({k: v for k, v in done.get("run_counts", {}).items() if k in run_counts})
        return ctx.results.load(stage), int(done["counts"]["rows"])
    with ctx.timer.stage(stage) as counted:
        kept, counts = ctx.results.keep(stage, build(), {"rows": F.count(F.lit(1))}, level)
        counted["rows"] = counts["rows"]
    marker: dict[str, Any] = {"counts": counts}
    if run_counts:
        marker["run_counts"] = {k: ctx.counts[k] for k in run_counts if k in ctx.counts}
    ctx.results.finish(stage, marker)
    return kept, counts["rows"]


def exact_copy_pairs(ctx: RunContext, features: DataFrame) -> tuple[DataFrame | None, DataFrame]:
    """Exact-copy ``pairs/`` rows (None when copies are not collapsed first) and the documents
    left to compare: each group of copies keeps its smallest id."""
    config = ctx.config
    ctx.counts["exact_copies"] = 0
    if not (config.method == "exact" or config.exact_first):
        return None, features
    build = lambda: features.transform(exact_copy_edges(config.exact_compare_text))  # noqa: E731
    edges, n_copies = kept_stage(ctx, "exact", build)
    ctx.counts["exact_copies"] = n_copies
    if n_copies == 0:
        return exact_pairs(edges), features
    copies = edges.select(F.col(DOC_B).alias(DOC_ID))
    limit = ctx.settings.broadcast_max_rows
    unique = features.join(maybe_broadcast(copies, n_copies, limit), DOC_ID, "left_anti")
    return exact_pairs(edges), unique


def candidate_pairs(
    ctx: RunContext,
    unique_docs: DataFrame,
    texts: Texts,
    addressed: AddressedInput | None = None,
) -> DataFrame:
    """Bucket the documents' band keys into distinct candidate pairs (kept, counted); under
    the anchored rule with the pairs of each large bucket's greedy over its kept members too
    (:func:`bucket_kept_pairs`)."""
    config = ctx.config
    entries = ctx.counts["input_rows"] * config.banding.bands
    parts = candidate_partitions(ctx.spark, entries)
    held: list[DataFrame] = []  # what the anchored candidates persisted on the way
    large_buckets = config.cluster_rule == "anchored" and config.method == "minhash"

    def build() -> DataFrame:
        if large_buckets:
            return bucket_kept_pairs(ctx, unique_docs, texts, addressed, parts, held)
        return unique_docs.transform(banded_candidate_pairs(config.bucket_all_pairs_max, parts))

    run_counts = BUCKET_COUNTS if large_buckets else ()
    with shuffle_partitions_at_least(ctx.spark, parts):  # the distinct() of the pairs found too
        candidates, ctx.counts["candidate_pairs"] = kept_stage(
            ctx, "candidates", build, run_counts=run_counts
        )
    for df in held:
        df.unpersist()
    return candidates


def bucket_kept_pairs(
    ctx: RunContext,
    unique_docs: DataFrame,
    texts: Texts,
    addressed: AddressedInput | None,
    parts: int,
    held: list[DataFrame],
) -> DataFrame:
    """The anchored rule's candidates: the banded pairs and those of each large bucket's greedy
    over its kept members, distinct; the large buckets found in the same pass as the pairs,
    their members' sketches recomputed from their texts (persisted in ``held``: two jobs, one
    counting the members, one the greedy's comparisons into ``ctx.counts``)."""
    config, counts = ctx.config, ctx.counts
    found = unique_docs.transform(banded_pairs_and_members(config.bucket_all_pairs_max, parts))
    held.append(found.persist(MEMORY))
    pairs = found.where(F.col(BAND_KEY).isNull()).select(DOC_A, DOC_B)
    members = found.where(F.col(BAND_KEY).isNotNull()).select(BAND_KEY, F.col(DOC_A).alias(DOC_ID))
    ids = members.select(DOC_ID).distinct()
    n_ids = ids.count()
    counts["bucket_comparisons"] = counts["bucket_comparisons_skipped"] = 0
    if n_ids == 0:
        return pairs.distinct()
    broadcast = n_ids <= ctx.settings.broadcast_max_rows
    if callable(texts):  # the boilerplate step's cleaned texts, of "pairs" (id, id)
        wanted = texts(
            ids.select(F.col(DOC_ID).alias(DOC_A), F.col(DOC_ID).alias(DOC_B)), broadcast
        )
    elif addressed is not None and not broadcast:
        wanted = addressed.texts_of(ids)
    else:
        wanted = texts.join(F.broadcast(ids) if broadcast else ids, DOC_ID, "left_semi")
    sketches = wanted.transform(member_sketches(config))
    joined = members.join(sketches, DOC_ID)
    greedy = joined.transform(bucket_kept_candidates(config, parts))
    held.append(greedy.persist(MEMORY))
    row = greedy.agg(F.sum(COMPARISONS), F.sum(SKIPPED)).first()
    comparisons, skipped = (int(row[0] or 0), int(row[1] or 0)) if row else (0, 0)
    record_bucket_comparisons(counts, comparisons, skipped, config.bucket_kept_max)
    extra = greedy.where(F.col(DOC_A).isNotNull()).select(DOC_A, DOC_B)
    return pairs.unionByName(extra).distinct()


def near_duplicate_pairs(
    ctx: RunContext,
    features: DataFrame,
    texts: Texts,
    unique_docs: DataFrame,
    addressed: AddressedInput | None = None,
) -> DataFrame:
    """Candidates from ``unique_docs``' band keys, scored with ``features``' SimHash or with
    MinHash sets recomputed from their ``texts`` -> verified ``pairs/`` rows."""
    config, counts = ctx.config, ctx.counts
    candidates = candidate_pairs(ctx, unique_docs, texts, addressed)
    sides = 2 * counts["candidate_pairs"]
    chars = counts.get("text_chars", 0) / max(counts["input_rows"], 1)
    parts = verify_partitions(ctx.spark, sides, chars) if config.method == "minhash" else 0

    def verified_pairs() -> DataFrame:
        if config.method != "minhash":
            scored = candidates.transform(hamming_scored(features))
            return scored.where(F.col(HAMMING) <= config.hamming_k)
        scored = scored_candidates(ctx, candidates, texts, addressed, parts)
        return scored.transform(verified(config.threshold, config.measure))

    with shuffle_partitions_at_least(ctx.spark, parts):  # the text join's shuffle too
        kept, counts["near_pairs"] = kept_stage(ctx, "verify", verified_pairs)
    return (
        minhash_pairs(kept, config.measure) if config.method == "minhash" else simhash_pairs(kept)
    )


def scored_candidates(
    ctx: RunContext,
    candidates: DataFrame,
    texts: Texts,
    addressed: AddressedInput | None,
    parts: int,
) -> DataFrame:
    """Candidate pairs with their scores (exact Jaccard, estimate), the sides' texts read where
    the plan says: at their addresses, the cleaned texts, a broadcast, the bitmap scan, a
    join."""
    sides, limit = 2 * ctx.counts["candidate_pairs"], ctx.settings.broadcast_max_rows
    rows = ctx.counts["input_rows"]
    words_fit = addressed is not None and addressed.words_fit(rows, limit)
    choice = ctx.plan.record(
        decide_verify_texts(ctx.facts, ctx.settings, sides, addressed is not None, words_fit)
    )
    config, where = ctx.config, choice.where
    if where == "addresses":
        assert addressed is not None  # the plan's condition
        side_texts = addressed.side_texts(candidates, parts)
        return side_texts.transform(scored_side_texts(config, partitions=parts))
    broadcast = where == "broadcast" or (where == "cleaned" and sides <= limit)
    if callable(texts):  # "cleaned": the only choice the plan leaves a cleaning run
        docs = texts(candidates, broadcast)
    elif where == "bitmap":
        assert addressed is not None  # the plan's condition
        docs = addressed.texts_of(side_requests(candidates))
    else:
        docs = texts
    return candidates.transform(score_candidate_texts(docs, config, broadcast, partitions=parts))


def union_pairs(parts: list[DataFrame]) -> DataFrame:
    """The ``pairs/`` table from its parts (exact copies, near-duplicates), persisted."""
    pairs = parts[0]
    for part in parts[1:]:
        pairs = pairs.unionByName(part)
    if len(parts) > 1:
        # Each part has a shuffle's partitions; its rows are cheap to recompute here (the
        # verified scores are persisted), and ``pairs/`` gets half as many small files.
        pairs = pairs.coalesce(shuffle_partitions(pairs.sparkSession))
    return pairs.persist(MEMORY)
