"""End to end through the Python API on real local Spark and real Parquet."""

from __future__ import annotations

import collections
import json
import os
import time

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import ExecutionSettings, build_config
from neardup_spark.errors import UserError
from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.dedupe import dedupe, dedupe_steps, run
from neardup_spark.pipeline.facts import frame_facts
from neardup_spark.pipeline.plan import Plan
from neardup_spark.quality.generate import generate_corpus
from tests.plans import placed, ran
from tests.spark_state import session_conf


def word_shingles(text: str | None, k: int = 5) -> set[tuple[str, ...]]:
    """Independent brute force: normalise, split, k-word tuples (short docs: one shingle)."""
    words = (normalize_text(text) or "").split() if text is not None else []
    if not words:
        return set()
    if len(words) < k:
        return {tuple(words)}
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def brute_jaccard(x: str | None, y: str | None) -> float:
    a, b = word_shingles(x), word_shingles(y)
    return len(a & b) / len(a | b) if a | b else 0.0


def read(path) -> pa.Table:
    return ds.dataset(str(path)).to_table()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    table, truth = generate_corpus(1200, seed=11, mean_words=120)
    root = tmp_path_factory.mktemp("corpus")
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), root / "part-0.parquet")
    pq.write_table(table.slice(half), root / "part-1.parquet")
    return root, table, truth


@pytest.fixture(scope="module")
def finished_run(spark, corpus, tmp_path_factory):
    root, _, _ = corpus
    out = tmp_path_factory.mktemp("out") / "run"
    report = run(spark, str(root), str(out), build_config())
    # A small run over local Parquet: every step in this process (the default plan).
    ran(report, sketch="driver", pairs="driver", components="driver")
    ran(report, deduplicated="driver_copy")
    return out, report


def test_output_contract(finished_run, corpus):
    out, report = finished_run
    _, table, _ = corpus
    for name in ("clusters", "pairs", "deduplicated", "report.json", "_SUCCESS"):
        assert (out / name).exists(), name
    assert not (out / "_checkpoints").exists() and not (out / "_staging").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run_id"] == report["run_id"] and len(manifest["config_sha256"]) == 64
    assert len(manifest["input_files"]) == 2 and manifest["counts"] == report["counts"]
    clusters = read(out / "clusters")
    assert clusters.column_names == ["doc_id", "cluster_id", "is_representative", "similarity"]
    ids = clusters.column("doc_id").to_pylist()
    assert sorted(ids) == sorted(table.column("id").to_pylist())  # every row exactly once
    of = dict(zip(ids, clusters.column("cluster_id").to_pylist(), strict=True))
    reps = {
        d for d, r in zip(ids, clusters.column("is_representative").to_pylist(), strict=True) if r
    }
    assert reps == set(of.values())
    assert all(of[c] == c for c in reps)
    pairs = read(out / "pairs")
    assert pairs.column_names == [
        "doc_a",
        "doc_b",
        "method",
        "similarity",
        "jaccard",
        "estimate",
        "hamming",
    ]
    dedup = read(out / "deduplicated")
    assert dedup.column_names == [*table.column_names, "duplicates"]
    assert sorted(dedup.column("id").to_pylist()) == sorted(reps)
    members = collections.Counter(of.values())  # each kept document's cluster size
    assert dedup.column("duplicates").to_pylist() == [
        members[d] - 1 for d in dedup.column("id").to_pylist()
    ]
    saved = json.loads((out / "report.json").read_text())
    assert saved["counts"] == report["counts"]
    assert saved["counts"]["input_rows"] == table.num_rows
    assert saved["counts"]["clusters"] == len(reps)
    assert saved["counts"]["removed"] == table.num_rows - len(reps)
    assert saved["counts"]["verified_pairs"] == pairs.num_rows
    assert saved["banding"]["bands"] == 28 and saved["banding"]["rows"] == 7
    assert set(saved["stage_seconds"]) >= {
        "sketch",
        "candidates",
        "verify",
        "components",
        "write",
    }


def test_every_pair_passes_the_threshold_by_brute_force(finished_run, corpus):
    out, _ = finished_run
    _, table, _ = corpus
    text = dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))
    pairs = read(out / "pairs").to_pylist()
    assert pairs, "the corpus has planted duplicates"
    for p in pairs:
        assert p["doc_a"] < p["doc_b"]
        exact = brute_jaccard(text[p["doc_a"]], text[p["doc_b"]])
        assert p["jaccard"] == pytest.approx(exact, abs=1e-12)
        assert p["jaccard"] >= 0.8 and p["similarity"] == p["jaccard"]
        assert p["method"] in ("minhash", "exact")  # exact copies are collapsed first


def test_every_removal_has_its_pair_with_the_kept_document(finished_run):
    """The anchored rule's contract (the default): a removed document's pair with its kept
    document is in pairs/, at the threshold; no pair joins two kept documents (the components
    rule's contract: tests/pipeline/test_anchored.py)."""
    out, report = finished_run
    assert report["cluster_rule"] == "anchored"
    clusters = read(out / "clusters").to_pylist()
    pairs = {(p["doc_a"], p["doc_b"]): p for p in read(out / "pairs").to_pylist()}
    kept = {r["doc_id"] for r in clusters if r["is_representative"]}
    removed = [r for r in clusters if not r["is_representative"]]
    assert removed
    for r in removed:
        doc, own = r["doc_id"], r["cluster_id"]
        pair = pairs[min(doc, own), max(doc, own)]
        assert pair["similarity"] >= 0.8 and r["similarity"] == pytest.approx(pair["similarity"])
    assert not [p for p in pairs if p[0] in kept and p[1] in kept]


def test_recall_of_planted_pairs(finished_run, corpus):
    out, _ = finished_run
    _, _, truth = corpus
    clusters = read(out / "clusters")
    of = dict(
        zip(
            clusters.column("doc_id").to_pylist(),
            clusters.column("cluster_id").to_pylist(),
            strict=True,
        )
    )
    high = [t for t in truth.to_pylist() if t["jaccard"] >= 0.85]
    assert len(high) >= 100
    found = sum(of[t["doc_a"]] == of[t["doc_b"]] for t in high)
    assert found == len(high)


def clusters_and_pairs(result) -> tuple[list, list]:
    return (
        sorted(map(tuple, result.clusters.select("doc_id", "cluster_id").collect())),
        sorted(map(tuple, result.pairs.select("doc_a", "doc_b", "method", "jaccard").collect())),
    )


@pytest.mark.parametrize(
    ("input_parts", "shuffle_parts", "arrow_batch", "strategy"),
    [
        (1, 2, 100, "single_task"),
        # (distributed components' parity: test_components.py's chain, test_anchored.py)
        pytest.param(8, 16, 5000, "distributed", marks=pytest.mark.extended),
    ],
)
def test_same_clusters_whatever_the_partitioning(
    spark, corpus, finished_run, input_parts, shuffle_parts, arrow_batch, strategy
):
    """Input splits, shuffle partitions, Arrow batch size and the components' strategy (on the
    driver, in a single task, or distributed large-star/small-star) change nothing."""
    root, _, _ = corpus
    out, report = finished_run
    assert report["components"]["strategy"] == "driver"  # a small run's, by default
    ran(report, components="driver")
    expected = (
        sorted((r["doc_id"], r["cluster_id"]) for r in read(out / "clusters").to_pylist()),
        sorted(
            (p["doc_a"], p["doc_b"], p["method"], p["jaccard"])
            for p in read(out / "pairs").to_pylist()
        ),
    )
    execution = {
        "single_task": placed(pairs="spark", components="single_task"),
        "distributed": placed(components="distributed"),  # pairs found here
    }[strategy]
    settings = {
        "spark.sql.shuffle.partitions": str(shuffle_parts),
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(arrow_batch),
    }
    with session_conf(spark, settings):
        df = spark.read.parquet(str(root)).repartition(input_parts)
        result = dedupe(df, build_config(), execution)
        got = clusters_and_pairs(result)
        assert result.report["components"]["strategy"] == strategy
        ran(result.report, components=strategy)
        result.release()
    assert got == expected


def test_the_report_names_the_distributed_path_when_it_takes_no_round(spark, tmp_path):
    """Three copies of a text are a star around the smallest id already: the distributed path
    (forced) takes no round, and the report still says it ran, not the one task."""
    text = " ".join(f"word{i}" for i in range(40))
    table = pa.table({"id": ["a", "b", "c", "d"], "text": [text, text, text, "other words here"]})
    pq.write_table(table, tmp_path / "in.parquet")
    execution = ExecutionSettings(components_single_task_max_edges=0, driver_max_docs=0)
    inp, out = str(tmp_path / "in.parquet"), str(tmp_path / "out")
    report = run(spark, inp, out, build_config(), execution=execution)
    assert report["components"] == {"strategy": "distributed", "rounds": 0, "greedy_rounds": 0}
    ran(report, pairs="spark", components="distributed")
    clusters = read(tmp_path / "out" / "clusters").to_pylist()
    assert sorted((r["doc_id"], r["cluster_id"]) for r in clusters) == [
        ("a", "a"), ("b", "a"), ("c", "a"), ("d", "d")
    ]  # fmt: skip


def steps_writing_pairs(df, execution: ExecutionSettings, write):
    """The steps of a dedupe of ``df`` that write its pairs with ``write`` (as run() does)."""
    facts = frame_facts(df.sparkSession, df.schema["id"].dataType, cleaning=False)
    ctx = RunContext(df.sparkSession, build_config(), Plan(facts, execution))
    return dedupe_steps(ctx, df, write)


def test_pairs_written_alongside_the_components(spark, corpus, tmp_path):
    """``write_pairs`` gets the pairs table while the components run (found by the Spark
    stages, in one task): the same rows; a failed write cancels the components and is the
    error raised."""
    root, _, _ = corpus
    df = spark.read.parquet(str(root))
    as_stages = placed(pairs="spark", components="single_task")
    write = lambda p: p.write.parquet(str(tmp_path / "p"))  # noqa: E731
    result, found = steps_writing_pairs(df, as_stages, write)
    ran(result.report, pairs="spark", components="single_task")
    written = sorted(map(tuple, spark.read.parquet(str(tmp_path / "p")).collect()))
    assert written and written == sorted(map(tuple, result.pairs.collect()))
    assert "write" in result.report["stage_seconds"] and found.write_pairs is None
    result.release()

    def failing_write(pairs):
        raise UserError("pairs: disk full")

    with pytest.raises(UserError, match="disk full"):
        steps_writing_pairs(df, as_stages, failing_write)


def test_pairs_of_members_found_here_are_left_to_the_outputs_write(spark, corpus, tmp_path):
    """Members found on the driver take no time to wait for: the pairs are written with the
    other outputs, by ``found.write_pairs``."""
    root, _, _ = corpus
    df = spark.read.parquet(str(root))
    write = lambda p: p.write.parquet(str(tmp_path / "p"))  # noqa: E731
    result, found = steps_writing_pairs(df, placed(pairs="driver", components="driver"), write)
    assert result.report["components"]["strategy"] == "driver"
    ran(result.report, pairs="driver", components="driver")
    assert not (tmp_path / "p").exists() and found.write_pairs is not None
    found.write_pairs()
    written = sorted(map(tuple, spark.read.parquet(str(tmp_path / "p")).collect()))
    assert written and written == sorted(map(tuple, result.pairs.collect()))
    result.release()


def _write(tmp_path, rows, schema="id string, text string", spark=None):
    path = tmp_path / "in"
    spark.createDataFrame(rows, schema).write.parquet(str(path))
    return str(path)


def test_integer_ids_and_bad_texts(spark, tmp_path):
    base = " ".join(f"w{i}" for i in range(40))
    rows = [
        (10, base),
        (3, base + " extra"),
        (7, None),
        (8, ""),
        (9, "   \t "),
        (11, "?!"),
        (12, "one two"),
    ]
    inp = _write(tmp_path, rows, "id long, text string", spark)
    out = tmp_path / "out"
    report = run(spark, inp, str(out), build_config())
    clusters = read(out / "clusters")
    assert pa.types.is_int64(clusters.schema.field("doc_id").type)
    of = dict(
        zip(
            clusters.column("doc_id").to_pylist(),
            clusters.column("cluster_id").to_pylist(),
            strict=True,
        )
    )
    assert of == {10: 3, 3: 3, 7: 7, 8: 8, 9: 9, 11: 11, 12: 12}
    pairs = read(out / "pairs")
    assert pa.types.is_int64(pairs.schema.field("doc_a").type)
    assert pairs.to_pylist()[0]["doc_a"] == 3
    counts = report["counts"]
    assert counts["null_texts"] == 1 and counts["empty_texts"] == 3 and counts["short_texts"] == 1


def test_longest_text_representative(spark, tmp_path):
    base = " ".join(f"w{i}" for i in range(60))
    inp = _write(tmp_path, [("a", base), ("b", base + " tail words")], spark=spark)
    config = build_config(options={"representative": "longest_text"})
    result = dedupe(spark.read.parquet(inp), config)
    assert {r["doc_id"]: r["cluster_id"] for r in result.clusters.collect()} == {"a": "b", "b": "b"}
    assert [r["id"] for r in result.deduplicated.collect()] == ["b"]
    result.release()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("a", "x"), ("a", "y"), ("b", "z"), ("b", "w")], r"not unique: 'a' \(2x\), 'b' \(2x\)"),
        ([(None, "x"), ("b", "y")], "1 rows have a null id"),
    ],
)
def test_bad_ids_are_user_errors(spark, tmp_path, rows, message):
    inp = _write(tmp_path, rows, spark=spark)
    with pytest.raises(UserError, match=message):
        run(spark, inp, str(tmp_path / "out"), build_config())
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_missing_column_lists_the_columns(spark, tmp_path):
    inp = _write(tmp_path, [("a", "x")], "doc string, body string", spark)
    with pytest.raises(
        UserError, match=r"'id' is not in the input; columns present: doc \(string\)"
    ):
        run(spark, inp, str(tmp_path / "out"), build_config())


def test_wrong_text_type(spark, tmp_path):
    inp = _write(tmp_path, [("a", 1)], "id string, text int", spark)
    with pytest.raises(UserError, match="text column 'text' has type int"):
        run(spark, inp, str(tmp_path / "out"), build_config())


def test_missing_input(spark, tmp_path):
    with pytest.raises(UserError, match="input not found"):
        run(spark, str(tmp_path / "nope"), str(tmp_path / "out"), build_config())


def test_output_refused_replaced_or_protected(spark, tmp_path):
    inp = _write(tmp_path, [("a", "some text here"), ("b", "other text")], spark=spark)
    out = tmp_path / "out"
    run(spark, inp, str(out), build_config())
    with pytest.raises(UserError, match="already holds a finished run"):
        run(spark, inp, str(out), build_config())
    run(spark, inp, str(out), build_config(), overwrite=True)
    # a killed run leaves no _SUCCESS: the next run replaces it without --overwrite, but not
    # a file the job did not write, whatever its name and --overwrite
    (out / "_SUCCESS").unlink()
    (out / "clusters" / "stale.parquet").write_bytes(b"the user's")
    for overwrite in (False, True):
        with pytest.raises(UserError, match=r"did not write: clusters/stale\.parquet"):
            run(spark, inp, str(out), build_config(), overwrite=overwrite)
    assert (out / "clusters" / "stale.parquet").read_bytes() == b"the user's"
    (out / "clusters" / "stale.parquet").unlink()
    run(spark, inp, str(out), build_config())
    assert (out / "_SUCCESS").exists()
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(UserError, match="holds files this job did not write"):
        run(spark, inp, str(foreign), build_config(), overwrite=True)
    assert (foreign / "thesis.tex").exists()


def test_a_failed_background_action_cancels_the_running_job_and_is_the_error_raised(spark):
    """The id check runs alongside the per-document pass: a bad id must stop that pass, and the
    caller must see the id error, not the cancellation."""
    import time

    from neardup_spark.pipeline.execution import run_together

    tracker = spark.sparkContext.statusTracker()
    group = "cancel-test"

    def slow(batches):  # nested: pickled by value
        import time as t

        for batch in batches:
            t.sleep(0.5)
            yield batch

    def long_job() -> None:
        spark.sparkContext.setJobGroup(group, "long job")
        spark.range(200, numPartitions=100).mapInArrow(slow, "id long").count()

    def bad_ids() -> None:
        deadline = time.monotonic() + 120  # fail only once the long job runs
        while not tracker.getJobIdsForGroup(group) and time.monotonic() < deadline:
            time.sleep(0.05)
        raise UserError("ids in column 'id' are not unique")

    try:
        with pytest.raises(UserError, match="not unique"):
            run_together(spark, [bad_ids, long_job])
    finally:  # long_job ran in this thread: its group, description and cancel flag go
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            spark.sparkContext.setLocalProperty(key, None)  # type: ignore[arg-type]
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
    assert jobs and all(job.status == "FAILED" for job in jobs)  # cancelled, not run to the end


def test_a_failed_background_action_leaves_other_threads_jobs_alone(spark, tmp_path):
    """A notebook's own job, started from another thread, is not cancelled by a bad id: its
    task holds (a file marks its start) until the test lets it go, so the bad id's
    cancellation certainly falls while that job runs; then it finishes with its result."""
    from pyspark import InheritableThread

    from neardup_spark.pipeline.execution import run_together

    started, release = str(tmp_path / "started"), str(tmp_path / "release")
    results: list[int] = []
    errors: list[BaseException] = []

    def held(batches):  # nested: pickled by value, with the two paths
        import os
        import time as t

        with open(started, "a") as marker:
            marker.write("task\n")
        deadline = t.monotonic() + 300
        while not os.path.exists(release) and t.monotonic() < deadline:
            t.sleep(0.02)
        yield from batches

    def unrelated() -> None:
        spark.sparkContext.setJobGroup("unrelated", "someone else's job")
        try:
            # one task: the other core stays free for the jobs of run_together below
            results.append(spark.range(20, numPartitions=1).mapInArrow(held, "id long").count())
        except BaseException as exc:
            errors.append(exc)

    def bad_ids() -> None:
        raise UserError("ids in column 'id' are not unique")

    other = InheritableThread(target=unrelated, daemon=True)
    other.start()
    try:
        wait_until(lambda: os.path.exists(started) or not other.is_alive(), seconds=120)
        assert os.path.exists(started), errors  # the other thread's job is running
        with pytest.raises(UserError):
            run_together(spark, [bad_ids, lambda: spark.range(10).count()])
        assert other.is_alive() and not results and not errors  # still held, not cancelled
    finally:
        open(release, "w").close()
        other.join(timeout=120)
    assert not other.is_alive(), "the other thread's job did not finish once let go"
    assert errors == [] and results == [20]


def wait_until(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_actions_run_together_all_complete(spark, tmp_path):
    from neardup_spark.pipeline.execution import run_together

    df = spark.range(50)
    run_together(spark, [lambda n=n: df.write.parquet(str(tmp_path / str(n))) for n in range(3)])
    assert [pq.read_table(tmp_path / str(n)).num_rows for n in range(3)] == [50, 50, 50]


def test_per_document_partitions_group_small_splits_and_spread_few(spark):
    from pyspark.sql import functions as F

    from neardup_spark.pipeline.execution import byte_size, grouped_input, spread

    def layout(parts: int):
        docs = spark.range(200, numPartitions=parts).select(F.col("id").alias("doc_id"))
        grouped, count = grouped_input(docs)
        assert grouped.rdd.getNumPartitions() == count
        return spread(grouped, count)

    cores = spark.sparkContext.defaultParallelism
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key, None)
    try:
        spark.conf.set(key, "8m")  # 8 input splits per 64 MB Python task
        assert layout(8 * cores + 1).rdd.getNumPartitions() == 2 * cores
        assert layout(cores).rdd.getNumPartitions() == cores  # already one round
        assert layout(cores - 1).rdd.getNumPartitions() == 2 * cores  # spread, shuffled
        spark.conf.set(key, "128m")  # splits as large as a task: left alone
        assert layout(3 * cores + 1).rdd.getNumPartitions() == 3 * cores + 1
        assert sorted(r.doc_id for r in layout(40).collect()) == list(range(200))
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
    assert byte_size("8m") == 8 * 2**20 and byte_size("134217728b") == 128 * 2**20
