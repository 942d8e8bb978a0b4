"""The steps of a dedupe run, each deciding when Spark acts (persist or write, count) and
timing it.

:func:`neardup_spark.pipeline.dedupe.dedupe` chains them. A step keeps its result in a
:class:`~neardup_spark.pipeline.resume.StageResults` (Spark's cache for the Python API, Parquet
with a completion marker for a run that writes OUTPUT) and reads back a result an earlier run
finished instead of computing it again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark import __version__
from neardup_spark.columns import CLUSTER_ID, DOC_A, DOC_B, DOC_ID, HAMMING
from neardup_spark.config import DedupeConfig
from neardup_spark.io.corpus import as_documents, check_ids
from neardup_spark.pipeline.components import (
    connected_components,
    driver_clusters,
    driver_components,
    driver_members,
)
from neardup_spark.pipeline.driver_pairs import DriverTables, driver_pair_parts, pairs_fit_driver
from neardup_spark.pipeline.execution import (
    BROADCAST_MAX_ROWS,
    candidate_partitions,
    maybe_broadcast,
    run_alongside,
    shuffle_partitions,
    shuffle_partitions_at_least,
    single_task_edge_limit,
    spread,
    verify_partitions,
)
from neardup_spark.pipeline.filtered_scans import AddressedInput
from neardup_spark.pipeline.in_process import (
    LocalInput,
    SketchedHere,
    features_in_tasks,
    features_table,
    input_fits,
)
from neardup_spark.pipeline.reporting import (
    StageTimer,
    banding_section,
    input_count_columns,
    input_counts,
    simhash_section,
)
from neardup_spark.pipeline.resume import StageResults
from neardup_spark.runtime.engine import from_arrow_batches
from neardup_spark.runtime.faults import batch_faults, wait_for_a_busy_batch_if_asked
from neardup_spark.stages.candidates import banded_candidate_pairs
from neardup_spark.stages.clusters import (
    cluster_table,
    exact_pairs,
    minhash_pairs,
    preferred_representatives,
    representatives,
    simhash_pairs,
)
from neardup_spark.stages.documents import document_features
from neardup_spark.stages.exact_copies import exact_copy_edges
from neardup_spark.stages.verify import (
    hamming_scored,
    score_candidate_texts,
    scored_side_texts,
    side_requests,
    verified,
)

# The per-document table is cached on local disk, not on the JVM heap: a 2 GB heap then serves
# corpora of millions of documents, and the OS page cache keeps re-reads fast.
BULK_STORAGE = StorageLevel.DISK_ONLY
MEMORY = StorageLevel.MEMORY_AND_DISK
PAIR_STAGES = ("exact", "candidates", "verify")


def document_table(
    df: DataFrame,
    parts: int,
    config: DedupeConfig,
    timer: StageTimer,
    documents: DataFrame | None = None,
    features_of: Callable[[DataFrame], DataFrame] | None = None,
    results: StageResults | None = None,
    local: LocalInput | None = None,
) -> tuple[DataFrame, dict[str, int], SketchedHere | None]:
    """The one per-document pass (kept in ``results``; no shingle sets: verification
    recomputes those of the candidates only) and the input counts, with the id check running
    alongside it (a bad id cancels the pass and is the error raised). ``check_ids`` times what
    is left of the check once the pass is done. ``documents`` (``doc_id``, ``text``; default:
    ``df``'s id and text columns) is what the pass reads; ``features_of`` replaces the pass
    (the boilerplate step's cleaning one). ``local``: ``df``'s files, which this process may
    read and sketch itself (:mod:`~neardup_spark.pipeline.in_process`; ids checked as the
    Spark path checks them): the third value is then the table and texts it read (texts kept
    when the pairs may be found on the driver), else None."""
    results = results or StageResults()
    done = results.finished("sketch")
    if done is not None:  # its ids were checked by the run that finished it
        counts = dict(done["counts"])
        timer.documents = counts["input_rows"]
        return results.load("sketch"), counts, None
    metrics = input_count_columns(config.ngram, config.char_ngram)
    if (
        local is not None
        and documents is None
        and features_of is None
        and input_fits(local.paths, config, local.limits)
    ):
        with timer.stage("sketch") as counted:
            here = features_table(df, local, config, keep_texts=bool(config.driver_max_docs))
            features = results.keep_table("sketch", df.sparkSession, here.features, parts)
            counts = input_counts(here.features, config.ngram, config.char_ngram)
            counted["rows"] = counts["input_rows"]
        timer.on_driver.append("sketch")
        timer.documents = counts["input_rows"]
        results.finish("sketch", {"counts": counts})
        if counts["input_rows"] > config.driver_max_docs:
            here = SketchedHere(here.features, None)
        return features, counts, here
    spark = df.sparkSession
    wait_for_id_check = run_alongside(spark, lambda: checked_ids(df, config.id_col))
    read: DataFrame | None = None
    if local is not None and documents is None and features_of is None:
        read = features_in_tasks(df, local, config, parts)  # the tasks read the files
    if read is None:
        if documents is None:
            documents = as_documents(df, config.id_col, config.text_col)
        if features_of is None:
            features_of = document_features(config, with_sets=False, before_batch=batch_faults)
        read = spread(documents, parts).transform(features_of)
    features = read
    try:
        with timer.stage("sketch") as counted:
            features, counts = results.keep("sketch", features, metrics, BULK_STORAGE)
            counted["rows"] = counts["input_rows"]
    except Exception:  # (an interrupt is not waited on: it stops the process)
        wait_for_id_check()  # a bad id, which cancelled the pass, is the error to report
        raise
    with timer.stage("check_ids"):
        wait_for_id_check()
    timer.documents = counts["input_rows"]
    results.finish("sketch", {"counts": counts})
    return features, counts, None


def checked_ids(df: DataFrame, id_col: str) -> None:
    """:func:`check_ids`, after the test hook that holds it until a slow batch is busy."""
    wait_for_a_busy_batch_if_asked()
    check_ids(df, id_col)


def kept_stage(
    results: StageResults,
    stage: str,
    timer: StageTimer,
    build: Callable[[], DataFrame],
    level: StorageLevel = MEMORY,
) -> tuple[DataFrame, int]:
    """``stage``'s result and its rows: read back when an earlier run finished it, else built,
    kept and counted (timed as ``stage``), and marked finished."""
    done = results.finished(stage)
    if done is not None:
        return results.load(stage), int(done["counts"]["rows"])
    with timer.stage(stage) as counted:
        kept, counts = results.keep(stage, build(), {"rows": F.count(F.lit(1))}, level)
        counted["rows"] = counts["rows"]
    results.finish(stage, {"counts": counts})
    return kept, counts["rows"]


def exact_copy_pairs(
    features: DataFrame,
    config: DedupeConfig,
    timer: StageTimer,
    counts: dict[str, int],
    results: StageResults,
) -> tuple[DataFrame | None, DataFrame]:
    """Exact-copy ``pairs/`` rows (None when copies are not collapsed first) and the documents
    left to compare: each group of copies keeps its smallest id."""
    counts["exact_copies"] = 0
    if not (config.method == "exact" or config.exact_first):
        return None, features
    edges, n_copies = kept_stage(
        results,
        "exact",
        timer,
        lambda: features.transform(exact_copy_edges(config.exact_compare_text)),
    )
    counts["exact_copies"] = n_copies
    if n_copies == 0:
        return exact_pairs(edges), features
    copies = edges.select(F.col(DOC_B).alias(DOC_ID))
    unique = features.join(maybe_broadcast(copies, n_copies), DOC_ID, "left_anti")
    return exact_pairs(edges), unique


def candidate_pairs(
    unique_docs: DataFrame,
    config: DedupeConfig,
    timer: StageTimer,
    counts: dict[str, int],
    results: StageResults,
) -> DataFrame:
    """Bucket the documents' band keys into distinct candidate pairs (kept, counted)."""
    entries = counts["input_rows"] * config.banding.bands
    spark = unique_docs.sparkSession
    parts = candidate_partitions(spark, entries)
    with shuffle_partitions_at_least(spark, parts):  # the distinct() of the pairs found too
        candidates, counts["candidate_pairs"] = kept_stage(
            results,
            "candidates",
            timer,
            lambda: unique_docs.transform(
                banded_candidate_pairs(config.bucket_all_pairs_max, parts)
            ),
        )
    return candidates


def near_duplicate_pairs(
    features: DataFrame,
    texts: DataFrame | Callable[[DataFrame, bool], DataFrame],
    unique_docs: DataFrame,
    config: DedupeConfig,
    timer: StageTimer,
    counts: dict[str, int],
    results: StageResults,
    addressed: AddressedInput | None = None,
) -> DataFrame:
    """Candidates from ``unique_docs``' band keys, scored with ``features``' SimHash or with
    MinHash sets recomputed from ``texts`` (``doc_id``, ``text``; or a function of the
    candidates and whether to broadcast them giving those, as the boilerplate step's cleaned
    texts) -> verified ``pairs/`` rows. ``addressed``: the input with addresses, to read only
    the candidates' texts when their list is too long to broadcast."""
    candidates = candidate_pairs(unique_docs, config, timer, counts, results)
    spark = candidates.sparkSession
    sides = 2 * counts["candidate_pairs"]
    chars = counts.get("text_chars", 0) / max(counts["input_rows"], 1)
    parts = verify_partitions(spark, sides, chars) if config.method == "minhash" else 0

    def verified_pairs() -> DataFrame:
        if config.method == "minhash":
            broadcast = sides <= BROADCAST_MAX_ROWS
            side_texts = None
            if addressed is not None and not callable(texts):
                # at any size: as fast as the broadcast join below the limit (1M: 19.8 vs
                # 20.0 s), so a run's cost does not step up at it
                side_texts = addressed.side_texts(candidates, parts)
            if side_texts is not None:
                scored = side_texts.transform(scored_side_texts(config, partitions=parts))
                return scored.transform(verified(config.threshold))
            if callable(texts):
                docs = texts(candidates, broadcast)
            elif not broadcast and addressed and addressed.words_fit(counts["input_rows"]):
                docs = addressed.texts_of(side_requests(candidates))
            else:
                docs = texts
            scored = candidates.transform(
                score_candidate_texts(docs, config, broadcast, partitions=parts)
            )
            return scored.transform(verified(config.threshold))
        return candidates.transform(hamming_scored(features)).where(
            F.col(HAMMING) <= config.hamming_k
        )

    with shuffle_partitions_at_least(spark, parts):  # the text join's shuffle too
        kept, counts["near_pairs"] = kept_stage(results, "verify", timer, verified_pairs)
    return minhash_pairs(kept) if config.method == "minhash" else simhash_pairs(kept)


def verified_edges(
    features: DataFrame,
    texts: DataFrame | Callable[[DataFrame, bool], DataFrame],
    config: DedupeConfig,
    timer: StageTimer,
    counts: dict[str, int],
    results: StageResults,
    addressed: AddressedInput | None = None,
    here: SketchedHere | None = None,
) -> tuple[DataFrame, DriverTables | None]:
    """Exact-copy edges and verified near-duplicate pairs (:func:`near_duplicate_pairs`) of
    the per-document table -> the ``pairs/`` rows, counted in ``counts``, and the run's
    :class:`~neardup_spark.pipeline.driver_pairs.DriverTables` when they were found here, else
    None. A small run finds them on the driver (:mod:`~neardup_spark.pipeline.driver_pairs`),
    the same pairs, from ``here`` (the per-document pass done in this process) when given."""
    driver = None
    if pairs_fit_driver(features, config, counts, here):
        pair_parts, driver = driver_pair_parts(features, texts, config, timer, counts, here)
        timer.on_driver += [stage for stage in PAIR_STAGES if stage in timer.seconds]
    else:
        exact, unique_docs = exact_copy_pairs(features, config, timer, counts, results)
        pair_parts = [exact] if exact is not None else []
        counts["candidate_pairs"] = counts["near_pairs"] = 0
        if config.method != "exact":
            pair_parts.append(
                near_duplicate_pairs(
                    features, texts, unique_docs, config, timer, counts, results, addressed
                )
            )
    # Exact-copy edges join a copy to its group's smallest id, near edges join unique texts:
    # the two sets are disjoint, so no job is needed to count their union.
    counts["verified_pairs"] = counts["exact_copies"] + counts["near_pairs"]
    return union_pairs(pair_parts), driver


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


def cluster_members(
    pairs: DataFrame,
    features: DataFrame,
    config: DedupeConfig,
    timer: StageTimer,
    counts: dict[str, int],
    checkpoint: Callable[[DataFrame], DataFrame],
    results: StageResults,
    ranking: tuple[DataFrame, list[tuple[str, bool]]] | None = None,
    driver: DriverTables | None = None,
) -> tuple[DataFrame, dict[str, Any]]:
    """Connected components of the verified pairs -> each clustered document's representative
    (``doc_id``, ``cluster_id``; kept in ``results``, finished by :func:`finish_components`)
    and the report's ``components``: the ``strategy`` taken (``driver``, ``single_task``,
    ``distributed``) and its ``rounds`` (a forest of stars takes none). ``ranking``: the keep
    policy's table and keys (:func:`~neardup_spark.io.corpus.preference_table`), which then
    chooses the representatives. ``driver``: the pairs found in this process
    (:func:`verified_edges`), whose components this process then labels with the single
    task's kernel (``driver``), within the single task's limit; members found here are kept
    in it."""
    done = results.finished("components")
    if done is not None:
        counts.update(done["counts"])
        rounds = int(done["rounds"])
        strategy = done.get("strategy") or ("distributed" if rounds else "single_task")
        return results.load("components"), {"strategy": strategy, "rounds": rounds}
    if driver is not None and members_on_driver(config, counts, ranking, driver):
        with timer.stage("components") as counted:
            driver.members, removed = driver_members(driver.edges)
            members = from_arrow_batches(pairs.sparkSession, driver.members)
            counted["removed"], counted["rows"] = removed, counts["verified_pairs"]
        timer.on_driver.append("components")
        counts["removed"] = removed
        counts["clusters"] = counts["input_rows"] - removed
        return members, {"strategy": "driver", "rounds": 0}
    with timer.stage("components") as counted:
        edges = pairs.select(DOC_A, DOC_B)
        n_edges = counts["verified_pairs"]
        limit = single_task_edge_limit(
            pairs.sparkSession, config.components_single_task_max_edges, n_edges, edges
        )
        single_task = n_edges <= limit  # as connected_components decides
        on_driver = single_task and driver is not None
        if single_task and driver is not None:
            labels, rounds = driver_components(pairs.sparkSession, driver.edges), 0
            timer.on_driver.append("components")
        else:
            labels, rounds = connected_components(
                edges, checkpoint, n_edges=n_edges, single_task_max_edges=limit
            )
        if single_task and (config.representative != "smallest_id" or ranking is not None):
            labels = labels.persist()  # read twice: the single task would run twice
        if ranking is not None:
            small = 2 * counts["verified_pairs"] <= BROADCAST_MAX_ROWS
            rule = preferred_representatives(ranking[1], ranking[0], small)
        else:
            rule = representatives(config.representative, features)
        members, kept = results.keep(
            "components",
            labels.transform(rule),
            {"removed": F.sum((F.col(DOC_ID) != F.col(CLUSTER_ID)).cast("long"))},
            MEMORY,
        )
        labels.unpersist()
        removed = counted["removed"] = kept["removed"]
        counted["rows"] = counts["verified_pairs"]
    counts["removed"] = removed
    counts["clusters"] = counts["input_rows"] - removed
    strategy = "driver" if on_driver else "single_task" if single_task else "distributed"
    return members, {"strategy": strategy, "rounds": rounds}


def members_on_driver(
    config: DedupeConfig,
    counts: dict[str, int],
    ranking: tuple[DataFrame, list[tuple[str, bool]]] | None,
    driver: DriverTables | None,
) -> bool:
    """Whether :func:`cluster_members` finds the members in this process and keeps no result
    (below this size a rerun costs less than staging): the pairs were found here, the
    representatives are the smallest ids, and the single task may take the graph."""
    limit = config.components_single_task_max_edges
    return (
        driver is not None
        and ranking is None
        and config.representative == "smallest_id"
        and (limit is None or counts["verified_pairs"] <= limit)
    )


def finish_components(
    results: StageResults, counts: dict[str, int], components: dict[str, Any]
) -> None:
    """Mark the components stage finished (once ``pairs/``, staged alongside it, is written)."""
    if "components" not in results.resumed:
        marker = {"removed": counts["removed"], "clusters": counts["clusters"]}
        results.finish("components", {"counts": marker, **components, "staged": ["pairs"]})


def output_tables(
    df: DataFrame,
    features: DataFrame,
    members: DataFrame,
    config: DedupeConfig,
    counts: dict[str, int],
    addressed: AddressedInput | None = None,
    driver: DriverTables | None = None,
) -> tuple[DataFrame, DataFrame, pa.Table | None]:
    """The ``clusters/`` table (every document) and ``deduplicated/`` (input rows of the
    representatives and singletons; through ``addressed`` when the removed documents are too
    many to broadcast); and ``clusters/`` as a table of this process when the members were
    found here (``driver``), which the DataFrame then reads."""
    n_members = 2 * counts["verified_pairs"]  # an upper bound on the documents in clusters
    clusters = features.transform(cluster_table(maybe_broadcast(members, n_members)))
    clusters_here = None
    if driver is not None and driver.members is not None:
        schema = to_arrow_schema(clusters.schema)
        clusters_here = driver_clusters(driver.ids, driver.members, schema)
        clusters = from_arrow_batches(features.sparkSession, clusters_here)
    removed = members.where(F.col(DOC_ID) != F.col(CLUSTER_ID)).select(DOC_ID)
    many = counts["removed"] > BROADCAST_MAX_ROWS
    if many and addressed and addressed.words_fit(counts["input_rows"]):
        return clusters, addressed.rows_without(removed), clusters_here
    removed_ids = removed.select(F.col(DOC_ID).alias(config.id_col))
    deduplicated = df.join(
        maybe_broadcast(removed_ids, counts["removed"]), config.id_col, "left_anti"
    )
    return clusters, deduplicated, clusters_here


def run_report(
    config: DedupeConfig, counts: dict[str, int], components: dict[str, Any], timer: StageTimer
) -> dict[str, object]:
    """The report of :func:`~neardup_spark.pipeline.dedupe.dedupe`."""
    report: dict[str, object] = {
        "neardup_spark_version": __version__,
        "method": config.method,
        "config": config.to_dict(),
        "counts": counts,
        "components": components,
        "stage_seconds": timer.seconds,
        "stages_on_driver": list(timer.on_driver),
    }
    if config.method == "minhash":
        report["banding"] = banding_section(config)
    if config.method == "simhash":
        report["simhash"] = simhash_section(config)
    return report
