"""The steps of indexing one nightly batch, chained by
:func:`neardup_spark.nightly.run.index_batch`. Each step decides when Spark acts and times it;
``n_new`` (the batch's documents) bounds every batch-side table, so broadcasts are sized by it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch.minhash import sorted_set_columns, stored_set_sketches_fn
from neardup_spark.columns import (
    BAND_KEY,
    BAND_KEYS,
    CLUSTER_ID,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAS_TEXT,
    JACCARD,
    N_SHINGLES,
    SHINGLES,
    SKETCH,
    TEXT,
)
from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.io.corpus import check_ids
from neardup_spark.io.filesystem import join
from neardup_spark.nightly.edges import buckets_needed, edge_ends, incident_edges
from neardup_spark.nightly.stable_ids import (
    IS_OLD,
    LIVE_BEFORE,
    OLD_CLUSTER,
    PREV_FP,
    PREV_HAS_TEXT,
)
from neardup_spark.nightly.store import (
    BANDS,
    BATCH,
    BATCHES,
    CONTENTS,
    FP_A,
    FP_B,
    PAIRS,
    Index,
    new_nonce,
)
from neardup_spark.pipeline.execution import BROADCAST_MAX_ROWS, maybe_broadcast
from neardup_spark.pipeline.reporting import StageTimer, input_counts
from neardup_spark.stages.candidates import bucket_members, candidate_pairs
from neardup_spark.stages.documents import minhash_sketch, text_features
from neardup_spark.stages.verify import score_candidates

DISK = StorageLevel.DISK_ONLY
MEMORY = StorageLevel.MEMORY_AND_DISK
_NEW_FP = "new_fp"
_RANK = "rank"

# Contents as stored (sorted shingle sets) with their sketch and band keys.
SET_SCHEMA = T.StructType(
    [
        T.StructField(DOC_ID, T.LongType(), False),
        T.StructField(SHINGLES, T.BinaryType(), False),
        T.StructField(N_SHINGLES, T.IntegerType(), False),
        T.StructField(SKETCH, T.BinaryType(), False),
        T.StructField(BAND_KEYS, T.ArrayType(T.LongType(), False), False),
    ]
)
# An indexed content as one side of a candidate pair.
SIDES_SCHEMA = T.StructType(
    [
        T.StructField(DOC_ID, T.LongType(), False),
        T.StructField(SHINGLES, T.BinaryType(), False),
        T.StructField(SKETCH, T.BinaryType(), False),
    ]
)


@dataclass
class BatchContext:
    """One batch being indexed: its input, the index, the names of what it writes, its counts."""

    spark: SparkSession
    df: DataFrame
    index: Index
    config: DedupeConfig
    run_id: str
    inputs: list[dict[str, Any]]
    id_type: str
    buckets: int
    timer: StageTimer
    started: float
    skipped: list[dict[str, str]]
    session: SessionSettings | None
    nonce: str = field(default_factory=new_nonce)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def seq(self) -> int:
        return len(self.index.batches) + 1

    @property
    def version_name(self) -> str:
        return f"v{self.index.version + 1:06d}-{self.nonce}"

    @property
    def segment(self) -> str:
        return f"s{self.index.version + 1:06d}-{self.nonce}"

    @property
    def results(self) -> str:
        """The batch's results directory, relative to the index."""
        return f"{BATCHES}/b{self.seq:06d}-{self.run_id}-{self.nonce}"

    @property
    def results_path(self) -> str:
        return join(self.index.root, self.results)

    @property
    def id_dtype(self) -> T.DataType:
        return T.StringType() if self.id_type == "string" else T.LongType()

    @property
    def n_new(self) -> int:
        return self.counts["input_rows"]


def keep(frame: DataFrame, level: StorageLevel = MEMORY) -> DataFrame:
    """Kept on the executors at its first action, lineage cut: later plans stay small (a
    persisted DataFrame still drags its whole lineage into every plan built on it)."""
    return frame.localCheckpoint(eager=False, storageLevel=level)


def batch_documents(df: DataFrame, config: DedupeConfig) -> DataFrame:
    """Input rows -> ``doc_id`` (string, or integer ids as bigint), ``text``."""
    id_col = F.col(config.id_col)
    if not isinstance(df.schema[config.id_col].dataType, T.StringType):
        id_col = id_col.cast(T.LongType())
    return df.select(id_col.alias(DOC_ID), F.col(config.text_col).alias(TEXT))


@dataclass
class NewDocuments:
    features: DataFrame  # text features of every new document
    docs: DataFrame  # doc_id, has_text, exact_fp
    fps: DataFrame  # the batch's distinct contents (exact_fp)


def fingerprint_batch(ctx: BatchContext) -> NewDocuments:
    """Check the ids, then the text features of the new documents (counted)."""
    with ctx.timer.stage("check_ids"):
        check_ids(ctx.df, ctx.config.id_col)
    config = ctx.config
    features = keep(
        batch_documents(ctx.df, config).transform(
            text_features(config.normalize, config.shingle_unit)
        ),
        DISK,
    )
    with ctx.timer.stage("fingerprint") as counted:
        ctx.counts.update(input_counts(features, config.ngram, config.char_ngram))
        counted["rows"] = ctx.n_new
    docs = features.select(DOC_ID, HAS_TEXT, EXACT_FP)
    fps = keep(docs.where(F.col(HAS_TEXT)).select(EXACT_FP).distinct())
    return NewDocuments(features, docs, fps)


@dataclass
class IndexedState:
    """What the index already holds about the batch (None for a new index)."""

    replaced: DataFrame | None = None  # indexed versions of re-crawled ids
    live_old: DataFrame | None = None  # indexed documents the batch does not replace
    live_before: DataFrame | None = None  # batch contents some document held before
    known: DataFrame | None = None  # batch contents the index stores
    n_known: int = 0


def look_up_batch(ctx: BatchContext, new: NewDocuments) -> IndexedState:
    """Re-crawled ids, live documents and known contents of the batch, from ``docs`` and the
    buckets of ``contents`` the batch's fingerprints fall in."""
    state = IndexedState()
    old = ctx.index.docs()
    n_new = ctx.n_new
    with ctx.timer.stage("lookup") as counted:
        if old is not None:
            new_ids = maybe_broadcast(new.docs.select(DOC_ID), n_new)
            state.replaced = keep(
                old.join(new_ids, DOC_ID, "left_semi").select(
                    DOC_ID,
                    F.col(EXACT_FP).alias(PREV_FP),
                    F.col(HAS_TEXT).alias(PREV_HAS_TEXT),
                    CLUSTER_ID,
                )
            )
            state.live_old = keep(old.join(new_ids, DOC_ID, "left_anti"))
            # Contents of the batch that some document held before it (replaced ones included).
            state.live_before = keep(
                old.where(F.col(HAS_TEXT))
                .select(EXACT_FP)
                .join(maybe_broadcast(new.fps, n_new), EXACT_FP, "left_semi")
                .distinct()
            )
        if ctx.index.has_rows(CONTENTS):
            fp_buckets = buckets_needed(new.fps, EXACT_FP, n_new, ctx.buckets)
            table = ctx.index.table(CONTENTS, fp_buckets)
            assert table is not None  # the unfiltered table exists
            state.known = keep(
                table.select(EXACT_FP)
                .join(maybe_broadcast(new.fps, n_new), EXACT_FP, "left_semi")
                .distinct()
            )
            counted["rows"] = state.n_known = state.known.count()
    ctx.counts["known_contents"] = state.n_known
    return state


def sketch_new_contents(
    ctx: BatchContext, new: NewDocuments, state: IndexedState
) -> tuple[DataFrame, int]:
    """Sorted shingle sets, sketches and band keys of the contents the index does not hold,
    one document per distinct text (persisted on disk, counted)."""
    text_docs = new.features.where(F.col(HAS_TEXT))
    if state.known is not None and state.n_known:
        text_docs = text_docs.join(
            maybe_broadcast(state.known, state.n_known), EXACT_FP, "left_anti"
        )
    # Each content's smallest document: only ids and fingerprints move, never the texts.
    rep_ids = text_docs.groupBy(EXACT_FP).agg(F.min(DOC_ID).alias(DOC_ID))
    reps = (
        text_docs.join(maybe_broadcast(rep_ids, ctx.n_new), [EXACT_FP, DOC_ID], "left_semi")
        .drop(DOC_ID)
        .withColumnRenamed(EXACT_FP, DOC_ID)
    )
    sketches = keep(
        reps.transform(minhash_sketch(ctx.config)).mapInArrow(sorted_set_columns, SET_SCHEMA),
        DISK,
    )
    with ctx.timer.stage("sketch") as counted:
        n_new_contents = counted["rows"] = sketches.count()
    ctx.counts["new_contents"] = n_new_contents
    return sketches, n_new_contents


def batch_candidates(ctx: BatchContext, sketches: DataFrame, n_new_contents: int) -> DataFrame:
    """Candidate pairs of contents: new x new (LSH buckets), new x indexed (band-key lookup in
    the buckets of the new keys); persisted and counted."""
    config = ctx.config
    n_keys = n_new_contents * config.banding.bands
    bands_table = ctx.index.table(BANDS)
    with ctx.timer.stage("candidates") as counted:
        candidates = sketches.select(DOC_ID, BAND_KEYS).transform(bucket_members)
        candidates = candidates.transform(candidate_pairs(config.bucket_all_pairs_max))
        if bands_table is not None and n_new_contents:
            keys = sketches.select(
                F.col(DOC_ID).alias(_NEW_FP), F.explode(BAND_KEYS).alias(BAND_KEY)
            )
            key_buckets = buckets_needed(keys, BAND_KEY, n_keys, ctx.buckets)
            table = ctx.index.table(BANDS, key_buckets)
            assert table is not None  # the unfiltered table exists
            # Per band key, the indexed contents up to bucket_all_pairs_max (the smallest
            # fingerprints): a large bucket costs each new content a few candidates, not one
            # per indexed member (which would grow with the index, night after night).
            first = Window.partitionBy(BAND_KEY).orderBy(EXACT_FP)
            old_pairs = (
                table.select(BAND_KEY, EXACT_FP)
                .join(maybe_broadcast(keys.select(BAND_KEY), n_keys), BAND_KEY, "left_semi")
                .withColumn(_RANK, F.row_number().over(first))
                .where(F.col(_RANK) <= config.bucket_all_pairs_max)
                .join(maybe_broadcast(keys, n_keys), BAND_KEY)
                .select(
                    F.least(_NEW_FP, EXACT_FP).alias(DOC_A),
                    F.greatest(_NEW_FP, EXACT_FP).alias(DOC_B),
                )
            )
            candidates = candidates.unionByName(old_pairs).distinct()
        candidates = keep(candidates)
        ctx.counts["candidate_pairs"] = counted["rows"] = candidates.count()
    return candidates


def verify_candidates(ctx: BatchContext, candidates: DataFrame, sketches: DataFrame) -> DataFrame:
    """Exact Jaccard of every candidate pair (the old sides' shingle sets from the index's
    ``contents``) -> verified edges ``fp_a``, ``fp_b``, ``jaccard``, ``estimate`` (persisted,
    counted as ``near_pairs``)."""
    n_candidates = ctx.counts["candidate_pairs"]
    config = ctx.config
    with ctx.timer.stage("verify") as counted:
        sides = sketches.select(DOC_ID, SHINGLES, SKETCH)
        if ctx.index.has_rows(CONTENTS) and n_candidates:
            ends = edge_ends(candidates, DOC_A, DOC_B)
            end_buckets = buckets_needed(ends, EXACT_FP, 2 * n_candidates, ctx.buckets)
            table = ctx.index.table(CONTENTS, end_buckets)
            assert table is not None  # the unfiltered table exists
            # Materialised once: scoring joins the sides twice (one per end of a pair), which
            # would otherwise scan the index's shingle sets twice.
            old_sides = keep(
                table.select(EXACT_FP, SHINGLES)
                .join(maybe_broadcast(ends, 2 * n_candidates), EXACT_FP, "left_semi")
                .select(F.col(EXACT_FP).alias(DOC_ID), SHINGLES)
                .mapInArrow(stored_set_sketches_fn(config.num_perm, config.seed), SIDES_SCHEMA)
            )
            counted["indexed_sides"] = old_sides.count()
            sides = sides.unionByName(old_sides)
        scored = candidates.transform(
            score_candidates(sides, n_candidates <= BROADCAST_MAX_ROWS)
        ).where(F.col(JACCARD) >= F.lit(config.threshold))
        new_edges = keep(
            scored.select(F.col(DOC_A).alias(FP_A), F.col(DOC_B).alias(FP_B), JACCARD, ESTIMATE)
        )
        ctx.counts["near_pairs"] = counted["verified"] = new_edges.count()
    return new_edges


@dataclass
class Touched:
    """The documents whose cluster may change: the new ones and the touched old clusters."""

    members: DataFrame  # doc_id, has_text, exact_fp, old_cluster, is_old, batch
    clusters: DataFrame | None  # the touched old cluster ids
    n_clusters: int
    n_members: int
    stored_edges: DataFrame | None  # the index's verified edges (fp_a, fp_b, jaccard, estimate)


def touched_members(
    ctx: BatchContext, new: NewDocuments, state: IndexedState, new_edges: DataFrame
) -> Touched:
    """The old clusters holding a copy or a verified neighbour of a new document, or a
    re-crawled document, and their live members next to the new documents."""
    pairs_table = ctx.index.table(PAIRS)
    with ctx.timer.stage("touched") as counted:
        members = new.docs.select(
            DOC_ID,
            HAS_TEXT,
            EXACT_FP,
            F.lit(None).cast(ctx.id_dtype).alias(OLD_CLUSTER),
            F.lit(False).alias(IS_OLD),
            F.lit(ctx.seq).cast("int").alias(BATCH),
        )
        n_touched, touched = 0, None
        if state.live_old is not None and state.replaced is not None:
            neighbours = new.fps.unionByName(edge_ends(new_edges, FP_A, FP_B))
            if pairs_table is not None and state.n_known:
                assert state.known is not None  # counted above
                incident = incident_edges(
                    pairs_table.select(FP_A, FP_B), state.known, state.n_known
                )
                neighbours = neighbours.unionByName(edge_ends(incident, FP_A, FP_B))
            touched = keep(
                state.live_old.where(F.col(HAS_TEXT))
                .join(neighbours.distinct(), EXACT_FP, "left_semi")
                .select(CLUSTER_ID)
                .unionByName(state.replaced.select(CLUSTER_ID))
                .distinct()
            )
            n_touched = touched.count()
            if n_touched:
                old_members = state.live_old.join(
                    maybe_broadcast(touched, n_touched), CLUSTER_ID, "left_semi"
                )
                members = members.unionByName(
                    old_members.select(
                        DOC_ID,
                        HAS_TEXT,
                        EXACT_FP,
                        F.col(CLUSTER_ID).alias(OLD_CLUSTER),
                        F.lit(True).alias(IS_OLD),
                        BATCH,
                    )
                )
        members = keep(members)
        counted["rows"] = n_members = members.count() if n_touched else ctx.n_new
        ctx.counts["touched_clusters"] = n_touched
    stored = pairs_table.select(FP_A, FP_B, JACCARD, ESTIMATE) if pairs_table is not None else None
    return Touched(members, touched, n_touched, n_members, stored)


def member_history(touched: Touched, state: IndexedState, n_new: int) -> DataFrame:
    """The members with their replaced version (re-crawls) and whether their content was live
    before the batch: what the stable-id rule needs."""
    members = touched.members
    if state.replaced is not None:
        history = members.join(
            state.replaced.select(DOC_ID, PREV_FP, PREV_HAS_TEXT), DOC_ID, "left"
        )
    else:
        history = members.select(
            "*",
            F.lit(None).cast("long").alias(PREV_FP),
            F.lit(None).cast("boolean").alias(PREV_HAS_TEXT),
        )
    if state.live_before is not None:
        flags = state.live_before.withColumn(LIVE_BEFORE, F.lit(True))
        return history.join(maybe_broadcast(flags, n_new), EXACT_FP, "left")
    return history.withColumn(LIVE_BEFORE, F.lit(None).cast("boolean"))
