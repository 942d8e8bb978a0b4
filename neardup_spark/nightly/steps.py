"""The steps of indexing one nightly batch, chained by
:func:`neardup_spark.nightly.run.index_batch`. Each step decides when Spark acts and times it.

What a night reads of the index: one scan of its compact keys files (fingerprints and band
keys, :mod:`.content_files`), the texts of the few indexed contents its candidates name, and
filtered scans of the narrow ``docs`` and ``pairs`` rows; ``n_new`` (the batch's documents)
bounds every batch-side table, so broadcasts are sized by it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

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
    TEXT,
)
from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.io.filesystem import join
from neardup_spark.nightly.contents import KIND, KNOWN, MATCH, PART, ROW, fetch_texts, probe_index
from neardup_spark.nightly.docs import current_rows
from neardup_spark.nightly.edges import edge_ends, incident_edges
from neardup_spark.nightly.layout import BATCHES
from neardup_spark.nightly.stable_ids import (
    IS_OLD,
    LIVE_BEFORE,
    OLD_CLUSTER,
    PREV_CLUSTER,
    PREV_FP,
    PREV_HAS_TEXT,
)
from neardup_spark.nightly.store import BATCH, FP_A, FP_B, Index, new_nonce
from neardup_spark.nightly.text_stash import (
    STASH_DIR,
    TextStash,
    stash_files,
    stashed_texts,
    stashing_features,
)
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.execution import (
    candidate_partitions,
    grouped_input,
    maybe_broadcast,
    verify_partitions,
)
from neardup_spark.pipeline.plan import Plan
from neardup_spark.pipeline.reporting import StageTimer
from neardup_spark.pipeline.sketch import document_table
from neardup_spark.runtime.faults import batch_faults
from neardup_spark.runtime.spark_compat import local_checkpoint, to_arrow
from neardup_spark.stages.candidates import banded_candidate_pairs
from neardup_spark.stages.names import column
from neardup_spark.stages.verify import score_candidate_texts, verified

MEMORY = StorageLevel.MEMORY_AND_DISK
_NEW_FP, _OLD_FP, _RANK = "new_fp", "old_fp", "rank"


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
    plan: Plan  # where its steps run (pipeline/plan.py), with the batch's facts
    input_format: str | None = None  # the batch's files' format (None: an input table)
    nonce: str = field(default_factory=new_nonce)
    counts: dict[str, int] = field(default_factory=dict)
    # The batch's doc_id and text, when this process read it (nightly/driver_read.py).
    documents: pa.Table | None = None
    document_files: list[str] | None = None  # the local Parquet files they were read from
    # The batch's normalised texts, when Spark's per-document pass wrote them (.text_stash).
    stash: TextStash | None = None

    def run_context(self) -> RunContext:
        """The full run's context of this night: its per-document pass is the full run's."""
        return RunContext(self.spark, self.config, self.plan, self.timer, self.counts)

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


def needs_stored_edges(ctx: BatchContext, touched_clusters: int) -> bool:
    """Whether the night's clustering needs the stored edges between its members' contents:
    when it touches an indexed cluster, and when it brings back contents the index holds
    (``known_contents``) even if no live document holds them any more (dead contents revived:
    their stored edges are the only record that they are near-duplicates; no candidate pair
    is made between two known contents)."""
    return bool(touched_clusters or ctx.counts.get("known_contents"))


def keep(frame: DataFrame, level: StorageLevel = MEMORY) -> DataFrame:
    """Kept on the executors at its first action, lineage cut: later plans stay small (a
    persisted DataFrame still drags its whole lineage into every plan built on it)."""
    return local_checkpoint(frame, eager=False, level=level)


def batch_documents(df: DataFrame, config: DedupeConfig) -> DataFrame:
    """Input rows -> ``doc_id`` (string, or integer ids as bigint), ``text``."""
    id_col = column(config.id_col)
    if not isinstance(df.schema[config.id_col].dataType, T.StringType):
        id_col = id_col.cast(T.LongType())
    return df.select(id_col.alias(DOC_ID), column(config.text_col).alias(TEXT))


@dataclass
class NewDocuments:
    features: DataFrame  # the full run's per-document table of every new document
    docs: DataFrame  # doc_id, has_text, exact_fp
    contents: DataFrame  # one row per distinct text: exact_fp, doc_id (its smallest), band_keys
    n_contents: int


def batch_features(ctx: BatchContext) -> DataFrame:
    """The full run's per-document pass over the batch (persisted), the id check alongside;
    the input counts go to ``ctx.counts``, the normalised texts to the batch's stash
    (``ctx.stash``, :mod:`.text_stash`). Both ways of indexing a night start from it."""
    df, parts = grouped_input(ctx.df)
    directory = ctx.index.segment_path(ctx.segment, STASH_DIR)
    features, _ = document_table(
        ctx.run_context(),
        df,
        parts,
        documents=batch_documents(df, ctx.config),
        features_of=stashing_features(ctx.config, directory, batch_faults),
    )
    ctx.stash = stash_files(ctx.index.storage, directory)
    return features


def index_documents(ctx: BatchContext, features: DataFrame) -> NewDocuments:
    """The batch's contents: one row per distinct normalised text, with its smallest document
    (persisted and counted)."""
    docs = features.select(DOC_ID, HAS_TEXT, EXACT_FP)
    contents = keep(
        features.where(F.col(HAS_TEXT))
        .groupBy(EXACT_FP)
        # A text's band keys are a function of the text: any of its documents' will do.
        .agg(F.min(DOC_ID).alias(DOC_ID), F.first(BAND_KEYS).alias(BAND_KEYS))
    )
    with ctx.timer.stage("contents") as counted:
        n_contents = counted["rows"] = contents.count()
    return NewDocuments(features, docs, contents, n_contents)


@dataclass
class IndexedNight:
    """What indexing a night produced, by either path: the new segment's manifest entry, the
    clustering's statistics, the components section of the report, old clusters touched."""

    segment: dict[str, Any]
    stats: dict[str, int]
    components: dict[str, Any]
    touched_clusters: int


def _sorted_arrays(contents: DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The batch's fingerprints and distinct band keys, sorted (shipped with the probe)."""
    table = to_arrow(contents.select(EXACT_FP, BAND_KEYS))
    fps = np.sort(table.column(EXACT_FP).to_numpy())
    keys = table.column(BAND_KEYS).combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return fps, np.unique(keys)


@dataclass
class Probe:
    """What the index holds of the batch (an empty index: nothing)."""

    hits: DataFrame | None  # kind, band_key, exact_fp, part, row (see probe_index)
    known: DataFrame | None  # exact_fp: batch contents the index holds
    n_known: int = 0


def probe_index_keys(ctx: BatchContext, new: NewDocuments) -> Probe:
    """One scan of every contents part: which batch contents the index holds, and which
    indexed contents share a band key with a batch content (per key, the
    ``bucket_all_pairs_max`` smallest fingerprints of each part)."""
    parts = ctx.index.content_parts()
    if not parts or not new.n_contents:
        ctx.counts["known_contents"] = 0
        return Probe(None, None)
    with ctx.timer.stage("probe") as counted:
        fps, keys = _sorted_arrays(new.contents)
        hits = keep(
            probe_index(
                ctx.spark,
                parts,
                fps,
                keys,
                ctx.config.bucket_all_pairs_max,
                ctx.index.keys_checksums(),
            )
        )
        known = keep(hits.where(F.col(KIND) == KNOWN).select(EXACT_FP).distinct())
        counted["rows"] = n_known = known.count()
        counted["parts"] = len(parts)
    ctx.counts["known_contents"] = n_known
    return Probe(hits, known, n_known)


def known_fingerprints(probe: Probe) -> np.ndarray:
    """The batch contents the index holds, as sorted fingerprints (int64)."""
    if probe.known is None or not probe.n_known:
        return np.zeros(0, np.int64)
    return np.sort(to_arrow(probe.known.select(EXACT_FP)).column(0).to_numpy())


def new_contents(new: NewDocuments, probe: Probe) -> DataFrame:
    """The batch contents the index does not hold: ``exact_fp``, ``doc_id``, ``band_keys``."""
    if probe.known is None or not probe.n_known:
        return new.contents
    return new.contents.join(maybe_broadcast(probe.known, probe.n_known), EXACT_FP, "left_anti")


def _indexed_neighbours(ctx: BatchContext, fresh: DataFrame, probe: Probe) -> DataFrame:
    """New x indexed candidates: per band key of a new content, the indexed contents with that
    key up to ``bucket_all_pairs_max`` (the smallest fingerprints; a large bucket costs a new
    content a few candidates, not one per indexed member, which would grow night after
    night). Columns: ``doc_a < doc_b`` (fingerprints), ``old_fp``, ``part``, ``row``."""
    assert probe.hits is not None  # called with an index
    first = Window.partitionBy(BAND_KEY).orderBy(EXACT_FP)
    matches = (
        probe.hits.where(F.col(KIND) == MATCH)
        .withColumn(_RANK, F.row_number().over(first))
        .where(F.col(_RANK) <= ctx.config.bucket_all_pairs_max)
    )
    keys = fresh.select(F.col(EXACT_FP).alias(_NEW_FP), F.explode(BAND_KEYS).alias(BAND_KEY))
    n_keys = ctx.n_new * ctx.config.banding.bands
    return matches.join(maybe_broadcast(keys, n_keys), BAND_KEY).select(
        F.least(_NEW_FP, EXACT_FP).alias(DOC_A),
        F.greatest(_NEW_FP, EXACT_FP).alias(DOC_B),
        F.col(EXACT_FP).alias(_OLD_FP),
        PART,
        ROW,
    )


@dataclass
class Candidates:
    pairs: DataFrame  # doc_a < doc_b: content fingerprints
    stored: DataFrame | None  # where the indexed sides' texts are: part, row


def batch_candidates(ctx: BatchContext, fresh: DataFrame, n_fresh: int, probe: Probe) -> Candidates:
    """Candidate pairs of contents: new x new (the full run's LSH buckets over the new
    contents) and new x indexed (the probe's band-key matches); persisted and counted."""
    config = ctx.config
    with ctx.timer.stage("candidates") as counted:
        parts = candidate_partitions(ctx.spark, n_fresh * config.banding.bands)
        pairs = fresh.select(F.col(EXACT_FP).alias(DOC_ID), BAND_KEYS).transform(
            banded_candidate_pairs(config.bucket_all_pairs_max, parts)
        )
        stored = None
        if probe.hits is not None and n_fresh:
            neighbours = keep(_indexed_neighbours(ctx, fresh, probe))
            pairs = pairs.unionByName(neighbours.select(DOC_A, DOC_B)).distinct()
            stored = neighbours.select(PART, ROW)
        pairs = keep(pairs)
        ctx.counts["candidate_pairs"] = counted["rows"] = pairs.count()
    return Candidates(pairs, stored)


def verify_candidates(ctx: BatchContext, candidates: Candidates, fresh: DataFrame) -> DataFrame:
    """Exact Jaccard of every candidate pair, both sides shingled from normalised text by the
    full run's kernel: new contents' read from the batch (:func:`candidate_texts`), indexed
    contents' fetched from their parts. -> verified edges ``fp_a``, ``fp_b``, ``jaccard``,
    ``estimate`` (persisted, counted as ``near_pairs``)."""
    n_candidates = ctx.counts["candidate_pairs"]
    with ctx.timer.stage("verify") as counted:
        sides = candidate_texts(ctx, candidates.pairs, fresh)
        if candidates.stored is not None:
            sides = sides.unionByName(fetch_texts(candidates.stored))
        broadcast = 2 * n_candidates <= ctx.plan.settings.broadcast_max_rows
        # Partitions by text bytes, as in a full run: a fixed few held the sides of a
        # 1M-document build in a 2 GB local driver (the local executor's heap) at ~330 MB each.
        chars = ctx.counts.get("text_chars", 0) / max(ctx.n_new, 1)
        parts = verify_partitions(ctx.spark, 2 * n_candidates, chars)
        scored = candidates.pairs.transform(
            score_candidate_texts(sides, ctx.config, broadcast, normalized=True, partitions=parts)
        ).transform(verified(ctx.config.threshold))
        edges = keep(
            scored.select(F.col(DOC_A).alias(FP_A), F.col(DOC_B).alias(FP_B), JACCARD, ESTIMATE)
        )
        ctx.counts["near_pairs"] = counted["verified"] = edges.count()
    return edges


def candidate_texts(ctx: BatchContext, pairs: DataFrame, fresh: DataFrame) -> DataFrame:
    """The normalised texts of the new contents in candidate ``pairs`` (``doc_a``, ``doc_b``:
    fingerprints): ``doc_id`` (the fingerprint), ``text``; read from the batch's stash, where
    its per-document pass left them (each text once, nothing shuffled but the fingerprints;
    reading the input again and normalising them cost a 300,000-document build 15 CPU
    seconds)."""
    assert ctx.stash is not None  # written by batch_features
    ends = pairs.select(F.col(DOC_A).alias(EXACT_FP)).unionByName(
        pairs.select(F.col(DOC_B).alias(EXACT_FP))
    )
    wanted = fresh.select(EXACT_FP).join(ends.distinct(), EXACT_FP, "left_semi")
    return stashed_texts(wanted, ctx.stash)


@dataclass
class Touched:
    """The documents whose cluster may change: the new ones and the touched old clusters."""

    members: DataFrame  # doc_id, has_text, exact_fp, old_cluster, is_old, batch
    replaced: DataFrame | None  # current rows of re-crawled ids: doc_id, prev_*, cluster_id
    live_before: DataFrame | None  # batch contents some document held before the batch
    n_clusters: int
    n_members: int


def _neighbours(ctx: BatchContext, new: NewDocuments, probe: Probe, edges: DataFrame) -> DataFrame:
    """Contents whose holders' clusters the batch may touch: the batch's, their verified
    neighbours, and the stored neighbours of the batch contents the index holds."""
    fps = new.contents.select(EXACT_FP).unionByName(edge_ends(edges, FP_A, FP_B))
    stored = ctx.index.pairs()
    if stored is not None and probe.known is not None and probe.n_known:
        incident = incident_edges(stored.select(FP_A, FP_B), probe.known, probe.n_known)
        fps = fps.unionByName(edge_ends(incident, FP_A, FP_B))
    return fps.distinct()


def touched_members(
    ctx: BatchContext, new: NewDocuments, probe: Probe, edges: DataFrame
) -> Touched:
    """Re-crawled ids, the old clusters holding a batch content, a verified neighbour or a
    re-crawled document, and their live members next to the new documents."""
    rows = ctx.index.docs_rows()
    members = new.docs.select(
        DOC_ID,
        HAS_TEXT,
        EXACT_FP,
        F.lit(None).cast(ctx.id_dtype).alias(OLD_CLUSTER),
        F.lit(False).alias(IS_OLD),
        F.lit(ctx.seq).cast("int").alias(BATCH),
    )
    if rows is None:
        ctx.counts["touched_clusters"] = 0
        return Touched(keep(members), None, None, 0, ctx.n_new)
    with ctx.timer.stage("touched") as counted:
        n_new = ctx.n_new
        ids = maybe_broadcast(new.docs.select(DOC_ID), n_new)
        neighbours = keep(_neighbours(ctx, new, probe, edges))
        bound = n_new + 2 * ctx.counts["near_pairs"] + probe.n_known

        def near_the_batch(docs: DataFrame) -> DataFrame:
            by_id = docs.join(ids, DOC_ID, "left_semi")
            by_content = docs.join(maybe_broadcast(neighbours, bound), EXACT_FP, "left_semi")
            return by_id.unionByName(by_content).distinct()

        nearby = keep(current_rows(rows, near_the_batch))
        replaced = keep(
            nearby.join(ids, DOC_ID, "left_semi").select(
                DOC_ID,
                F.col(EXACT_FP).alias(PREV_FP),
                F.col(HAS_TEXT).alias(PREV_HAS_TEXT),
                CLUSTER_ID,
            )
        )
        batch_fps = new.contents.select(EXACT_FP)
        # Contents of the batch that some document held before it (replaced ones included).
        live_before = keep(
            nearby.where(F.col(HAS_TEXT))
            .select(EXACT_FP)
            .join(maybe_broadcast(batch_fps, n_new), EXACT_FP, "left_semi")
            .distinct()
        )
        touched = keep(
            nearby.where(F.col(HAS_TEXT))
            .join(ids, DOC_ID, "left_anti")
            .select(CLUSTER_ID)
            .unionByName(replaced.select(CLUSTER_ID))
            .distinct()
        )
        n_touched = touched.count()
        if n_touched:
            clusters = maybe_broadcast(touched, n_touched)

            def in_touched(docs: DataFrame) -> DataFrame:
                return docs.join(clusters, CLUSTER_ID, "left_semi").join(ids, DOC_ID, "left_anti")

            old_members = current_rows(rows, in_touched)
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
        counted["rows"] = n_members = members.count() if n_touched else n_new
        ctx.counts["touched_clusters"] = n_touched
    return Touched(members, replaced, live_before, n_touched, n_members)


def member_history(touched: Touched, n_new: int) -> DataFrame:
    """The members with their replaced version (re-crawls) and whether their content was live
    before the batch: what the stable-id rule needs."""
    members = touched.members
    if touched.replaced is not None:
        replaced = touched.replaced.select(
            DOC_ID, PREV_FP, PREV_HAS_TEXT, F.col(CLUSTER_ID).alias(PREV_CLUSTER)
        )
        history = members.join(replaced, DOC_ID, "left")
    else:
        history = members.select(
            "*",
            F.lit(None).cast("long").alias(PREV_FP),
            F.lit(None).cast("boolean").alias(PREV_HAS_TEXT),
            F.lit(None).cast(members.schema[DOC_ID].dataType).alias(PREV_CLUSTER),
        )
    if touched.live_before is not None:
        flags = touched.live_before.withColumn(LIVE_BEFORE, F.lit(True))
        return history.join(maybe_broadcast(flags, n_new), EXACT_FP, "left")
    return history.withColumn(LIVE_BEFORE, F.lit(None).cast("boolean"))
