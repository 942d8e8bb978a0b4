"""The bad-input matrix and fault handling: every row accounted for, every user error explained."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.pipeline.dedupe import dedupe, run
from neardup_spark.runtime.faults import FAIL_ONCE_ENV
from tests.plans import placed, ran

REPO = Path(__file__).resolve().parents[2]


def words(prefix: str, n: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def clusters_of(out: Path) -> dict:
    table = ds.dataset(str(out / "clusters")).to_table()
    return dict(
        zip(table.column("doc_id").to_pylist(), table.column("cluster_id").to_pylist(), strict=True)
    )


def partition(mapping: dict) -> set[frozenset]:
    groups: dict = {}
    for doc, cluster in mapping.items():
        groups.setdefault(cluster, set()).add(doc)
    return {frozenset(g) for g in groups.values()}


def test_list_typed_text_column_is_named(spark, tmp_path):
    path = tmp_path / "in"
    spark.createDataFrame([("a", ["x", "y"])], "id string, text array<string>").write.parquet(
        str(path)
    )
    with pytest.raises(UserError, match=r"text column 'text' has type array<string>"):
        run(spark, str(path), str(tmp_path / "out"), build_config())


@pytest.mark.parametrize("typed", ["binary", "string"])
def test_binary_text_is_decoded_with_replacement(spark, tmp_path, typed):
    """Invalid UTF-8 in a binary text column, or in a string one (PyArrow and Spark write a
    string column's bytes unchecked): replaced for hashing and counted; the rows kept as read."""
    base = words("w", 40).encode()
    raw = pa.array([base, base + b" \xff\xfe tail", b"caf\xe9 au lait"], pa.binary())
    table = pa.table({"id": ["a", "b", "c"], "text": raw.view(getattr(pa, typed)())})
    pq.write_table(table, tmp_path / "in.parquet")
    report = run(spark, str(tmp_path / "in.parquet"), str(tmp_path / "out"), build_config())
    assert report["counts"]["replaced_bytes"] == 3
    assert report["counts"]["texts_with_replaced_bytes"] == 2
    assert clusters_of(tmp_path / "out") == {"a": "a", "b": "a", "c": "c"}
    dedup = ds.dataset(str(tmp_path / "out" / "deduplicated")).to_table()
    assert dedup.schema.field("text").type == getattr(pa, typed)()  # rows kept as they were
    kept = dict(
        zip(
            dedup.column("id").to_pylist(),
            dedup.column("text").cast(pa.binary()).to_pylist(),
            strict=True,
        )
    )
    assert kept == {"a": base, "c": b"caf\xe9 au lait"}


def test_empty_directory_and_no_parquet(spark, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match=r"no data files found under .*empty"):
        run(spark, str(empty), str(tmp_path / "o1"), build_config())
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("not parquet")
    with pytest.raises(UserError, match="other"):
        run(spark, str(other), str(tmp_path / "o2"), build_config())


def test_corrupt_file_named_or_skipped(spark, tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    base = words("w", 30)
    pq.write_table(pa.table({"id": ["a", "b"], "text": [base, base + " x"]}), inp / "good.parquet")
    (inp / "broken.parquet").write_bytes(b"PAR1 this is not a parquet file at all PAR1")
    with pytest.raises(UserError, match=r"1 unreadable Parquet file\(s\).*broken\.parquet"):
        run(spark, str(inp), str(tmp_path / "o1"), build_config())
    report = run(
        spark, str(inp), str(tmp_path / "o2"), build_config(options={"skip_corrupt": True})
    )
    assert [Path(s["path"]).name for s in report["skipped_files"]] == ["broken.parquet"]
    assert clusters_of(tmp_path / "o2") == {"a": "a", "b": "a"}
    saved = json.loads((tmp_path / "o2" / "report.json").read_text())
    assert saved["skipped_files"][0]["error"]


CJK = (
    "近重复文档检测是网络爬虫中的一个重要问题"
    "因为同一篇新闻会出现在许多网站上而且每一份拷贝只有很少的差别"
    "搜索引擎在索引之前删除这些拷贝以节省存储空间并且让用户看到更多不同的结果"
)


def test_text_without_spaces_uses_character_shingles(spark):
    rows = [
        ("zh1", CJK),
        ("zh2", CJK.replace("重要", "关键")),
        ("zh3", "完全不同的另一段中文内容" * 3),
    ]
    df = spark.createDataFrame(rows, "id string, text string")
    auto = dedupe(df, build_config())
    assert {r["doc_id"]: r["cluster_id"] for r in auto.clusters.collect()} == {
        "zh1": "zh1",
        "zh2": "zh1",
        "zh3": "zh3",
    }
    assert auto.report["counts"]["char_shingled_texts"] == 3
    auto.release()
    # with word shingles each text is a single "word": the near-duplicate is invisible
    words_only = dedupe(df, build_config(options={"shingle_unit": "word"}))
    assert words_only.report["counts"]["removed"] == 0
    words_only.release()


@pytest.mark.parametrize(
    ("method", "pairs"),
    [
        ("minhash", "driver"),
        ("minhash", "spark"),
        pytest.param("simhash", "spark", marks=pytest.mark.extended),
    ],
)
def test_50000_identical_documents_make_one_cluster_with_linear_edges(spark, method, pairs):
    df = spark.range(50_000).selectExpr("cast(id as string) as id", "'the same page again' as text")
    result = dedupe(df, build_config(options={"method": method}), placed(pairs=pairs))
    ran(result.report, pairs=pairs)
    counts = result.report["counts"]
    assert counts["clusters"] == 1 and counts["removed"] == 49_999
    assert counts["exact_copies"] == 49_999 and counts["verified_pairs"] == 49_999
    assert result.pairs.count() == 49_999  # a star, not 1.25 billion pairs
    result.release()


@pytest.mark.parametrize("pairs", ["driver", pytest.param("spark", marks=pytest.mark.extended)])
def test_shared_boilerplate_gives_linear_candidates_and_no_false_clusters(spark, pairs):
    boiler = words("nav", 100)
    n = 50_000
    df = spark.range(n).selectExpr(
        "cast(id as string) as id",
        f"concat('{boiler} ', concat_ws(' ', transform(sequence(0, 59), i -> "
        "concat('u', cast(id as string), '_', cast(i as string))))) as text",
    )
    result = dedupe(df, build_config(), placed(pairs=pairs))
    ran(result.report, pairs=pairs)
    counts = result.report["counts"]
    assert counts["candidate_pairs"] <= 2 * n  # O(n): big buckets become stars
    assert counts["near_pairs"] == 0 and counts["clusters"] == n  # J = 96/224, below 0.8
    result.release()


@pytest.mark.parametrize("pairs", [pytest.param("driver", marks=pytest.mark.extended), "spark"])
def test_a_20_mb_document_is_processed_whole(spark, pairs):
    big = words("t", 2_600_000)  # about 20 MB
    assert len(big) > 20_000_000
    edited = big.replace("t1000 ", "changed ", 1)
    df = spark.createDataFrame(
        [("big", big), ("big2", edited), ("small", "a b c")], "id string, text string"
    )
    result = dedupe(df, build_config(), placed(pairs=pairs))
    ran(result.report, pairs=pairs)
    rows = {r["doc_id"]: r["cluster_id"] for r in result.clusters.collect()}
    assert rows == {"big": "big", "big2": "big", "small": "small"}
    pair = result.pairs.first()
    assert pair["jaccard"] == pytest.approx((2_599_996 - 5) / (2_599_996 + 5))
    result.release()


corpus_texts = st.lists(
    st.one_of(
        st.none(),
        st.lists(
            st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta"]), max_size=12
        ).map(" ".join),
    ),
    min_size=1,
    max_size=14,
)


def brute_force_jaccard(a: str | None, b: str | None, k: int) -> float | None:
    """Jaccard of word k-shingles computed independently of the package: lower-case words (the
    test vocabulary has no punctuation), a text shorter than k words is one shingle of all its
    words, an empty or null text has no shingles (None: never similar)."""

    def shingles(text: str | None) -> set[tuple[str, ...]]:
        words = (text or "").lower().split()
        if not words:
            return set()
        if len(words) < k:
            return {tuple(words)}
        return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}

    sa, sb = shingles(a), shingles(b)
    if not sa or not sb:
        return None
    return len(sa & sb) / len(sa | sb)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=corpus_texts, dup_of=st.lists(st.integers(0, 13), max_size=6))
def test_invariants_on_random_corpora(spark, texts, dup_of):
    """Every id once; every reported pair truly similar (brute force); planted copies and pairs
    far above the threshold clustered together; clusters = components of pairs (the
    components rule: the anchored rule's invariants are tests/pipeline/test_anchored.py's)."""
    originals = len(texts)
    texts = texts + [texts[i % originals] for i in dup_of]
    ids = [f"d{i:03d}" for i in range(len(texts))]
    df = spark.createDataFrame(list(zip(ids, texts, strict=True)), "id string, text string")
    options = {"threshold": 0.5, "ngram": 2, "cluster_rule": "components"}
    result = dedupe(df, build_config(options=options))
    clusters = {r["doc_id"]: r["cluster_id"] for r in result.clusters.collect()}
    pairs = [r.asDict() for r in result.pairs.collect()]
    result.release()
    assert sorted(clusters) == ids  # every input id exactly once
    assert all(p["doc_a"] < p["doc_b"] for p in pairs)
    assert len({(p["doc_a"], p["doc_b"]) for p in pairs}) == len(pairs)
    text_of = dict(zip(ids, texts, strict=True))
    for p in pairs:  # nothing invented: every pair passes the threshold, by brute force
        exact = brute_force_jaccard(text_of[p["doc_a"]], text_of[p["doc_b"]], 2)
        assert exact is not None and exact >= 0.5 and p["jaccard"] == pytest.approx(exact)
        if p["estimate"] is not None:  # the MinHash estimate within 5 standard errors
            assert abs(p["estimate"] - exact) <= 5 * (exact * (1 - exact) / 200) ** 0.5 + 1e-9
    for j, i in enumerate(dup_of):  # nothing lost: a planted copy joins its original
        copy, original = ids[originals + j], ids[i % originals]
        if brute_force_jaccard(text_of[copy], text_of[original], 2) is not None:
            assert clusters[copy] == clusters[original]
    for x in ids:  # pairs far above the threshold (LSH misses them with p < 1e-30)
        for y in ids:
            similar = brute_force_jaccard(text_of[x], text_of[y], 2)
            if x < y and similar is not None and similar >= 0.9:
                assert clusters[x] == clusters[y], (x, y, similar)
    parent = {d: d for d in ids}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for p in pairs:
        parent[find(p["doc_a"])] = find(p["doc_b"])
    components: dict = {}
    for d in ids:
        components.setdefault(find(d), set()).add(d)
    assert {frozenset(c) for c in components.values()} == partition(clusters)


@pytest.mark.slow
def test_a_task_failing_once_is_retried_with_the_same_result(spark, tmp_path):
    """local[2,2] (two attempts per task): the job's one injected task failure is retried, and
    the clusters and pairs equal a clean run's (this suite's session, no failure injected)."""
    from neardup_spark.quality.generate import generate_corpus

    table, _ = generate_corpus(400, seed=3, mean_words=80)
    pq.write_table(table, tmp_path / "in.parquet")
    marker = tmp_path / "failed-once"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, FAIL_ONCE_ENV: str(marker)}

    def pairs(out: Path) -> list:
        t = (
            ds.dataset(str(out / "pairs"))
            .to_table()
            .sort_by([("doc_a", "ascending"), ("doc_b", "ascending")])
        )
        return t.select(["doc_a", "doc_b", "method", "jaccard"]).to_pylist()

    out = tmp_path / "out"
    # -v: Spark's own console, which reports the lost task (a quiet one shows errors only)
    args = ["-v", "dedupe", str(tmp_path / "in.parquet"), str(out), "--no-report", "--master"]
    # Spark tasks for the per-document pass (a batch read here has no retry to test)
    args += ["local[2,2]", "--set", "spark.sql.shuffle.partitions=2"]
    args += ["--set", "plan.sketch=spark"]
    retried = subprocess.run(
        [sys.executable, "-m", "neardup_spark", *args],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
        cwd=REPO,
    )
    assert retried.returncode == 0, retried.stderr[-2000:]
    assert marker.exists()  # the hook did fail one task attempt
    assert "injected task failure" in retried.stderr
    assert "plan              sketch spark," in retried.stdout  # the pass ran as Spark tasks
    retried_clusters, retried_pairs = clusters_of(out), pairs(out)
    # A clean run of the same input gives the same clusters and pairs.
    clean = tmp_path / "clean"
    run(spark, str(tmp_path / "in.parquet"), str(clean), build_config())
    assert clusters_of(clean) == retried_clusters
    assert pairs(clean) == retried_pairs
    assert len(partition(retried_clusters)) < len(retried_clusters)  # it found duplicates
