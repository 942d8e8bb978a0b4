"""The keep policy (``--prefer "COL [asc|desc], ..."``): each cluster's representative is its
first document by the input's columns, nulls last, ties to the smallest id; ``clusters/`` and
``deduplicated/`` follow it. Checked against a brute-force choice in Python."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.nightly.run import check_incremental_config
from neardup_spark.pipeline.dedupe import dedupe, run
from neardup_spark.quality.generate import generate_corpus

N_DOCS = 300


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A generated corpus with planted duplicates and the columns a user keeps by: a quality
    score (ties, nulls, and NaN: a missing score as CSV's "NaN" gives it, which ranks as a
    null, not above every number as Spark orders it), a tier (few values) and a fetch date."""
    table, _ = generate_corpus(N_DOCS, seed=9, mean_words=40)
    quality = [
        None if i % 11 == 0 else math.nan if i % 7 == 0 else round((i * 37 % 100) / 100, 1)
        for i in range(N_DOCS)
    ]
    tier = [None if i % 13 == 0 else i * 7 % 3 for i in range(N_DOCS)]
    table = table.append_column("quality", pa.array(quality, pa.float64()))
    table = table.append_column("tier", pa.array(tier, pa.int32()))
    path = tmp_path_factory.mktemp("prefer") / "corpus"
    path.mkdir()
    pq.write_table(table.slice(0, 150), path / "a.parquet")
    pq.write_table(table.slice(150), path / "b.parquet")
    return path, table


def read(path) -> pa.Table:
    return ds.dataset(str(path)).to_table()


def best_by(rows: list[dict], keys: list[tuple[str, bool]]) -> str:
    """The brute-force choice: first by ``keys`` (nulls last either way), then smallest id."""

    def key(row: dict) -> tuple:
        parts: list = []
        for name, desc in keys:
            value = row[name]
            if value is not None and value != value:  # NaN: missing, as null
                value = None
            parts += [value is None, 0 if value is None else (-value if desc else value)]
        return (*parts, row["id"])

    return min(rows, key=key)["id"]


def expected_clusters(clusters: pa.Table, table: pa.Table, keys) -> dict[str, str]:
    rows = {r["id"]: r for r in table.to_pylist()}
    groups: dict[str, list[dict]] = {}
    for doc, cluster in zip(
        clusters["doc_id"].to_pylist(), clusters["cluster_id"].to_pylist(), strict=True
    ):
        groups.setdefault(cluster, []).append(rows[doc])
    return {r["id"]: best_by(members, keys) for members in groups.values() for r in members}


@pytest.mark.parametrize(
    ("prefer", "keys"),
    [
        ("quality desc", [("quality", True)]),
        ("tier asc, quality desc", [("tier", False), ("quality", True)]),
    ],
)
def test_each_cluster_keeps_its_preferred_document(spark, corpus, tmp_path, prefer, keys):
    path, table = corpus
    plain = run(spark, str(path), str(tmp_path / "plain"), build_config())
    report = run(spark, str(path), str(tmp_path / "kept"), build_config(options={"prefer": prefer}))
    clusters = read(tmp_path / "kept" / "clusters")
    found = dict(
        zip(clusters["doc_id"].to_pylist(), clusters["cluster_id"].to_pylist(), strict=True)
    )
    assert found == expected_clusters(clusters, table, keys)
    # The same clusters as without a policy, only other representatives.
    default = read(tmp_path / "plain" / "clusters")
    assert expected_clusters(default, table, keys) == found
    assert report["counts"] == plain["counts"] and report["counts"]["removed"] > 20
    changed = sum(
        1
        for d, c in zip(
            default["doc_id"].to_pylist(), default["cluster_id"].to_pylist(), strict=True
        )
        if found[d] != c
    )
    assert changed > 0  # the policy did choose other documents than the smallest ids
    representatives = {d for d, c in found.items() if d == c}
    assert set(read(tmp_path / "kept" / "deduplicated")["id"].to_pylist()) == representatives
    flags = dict(
        zip(clusters["doc_id"].to_pylist(), clusters["is_representative"].to_pylist(), strict=True)
    )
    assert {d for d, rep in flags.items() if rep} == representatives


def test_the_choice_does_not_depend_on_partitioning(spark, corpus):
    path, _ = corpus
    config = build_config(options={"prefer": "quality desc"})
    df = spark.read.parquet(str(path))
    one = dedupe(df.coalesce(1), config)
    many = dedupe(df.repartition(7), config)
    assert sorted(one.clusters.collect()) == sorted(many.clusters.collect())
    one.release()
    many.release()


def test_bad_policies_are_user_errors(spark, corpus):
    path, _ = corpus
    df = spark.read.parquet(str(path))
    with pytest.raises(
        UserError, match=r"--prefer: no column 'score' in the input; columns present: id"
    ):
        dedupe(df, build_config(options={"prefer": "score desc"}))
    with pytest.raises(UserError, match="'tags' has type array<string>"):
        dedupe(df.selectExpr("*", "array('a') AS tags"), build_config(options={"prefer": "tags"}))
    with pytest.raises(UserError, match="not both"):
        build_config(options={"prefer": "quality", "representative": "longest_text"})
    with pytest.raises(UserError, match="--prefer is not supported with --index"):
        check_incremental_config(build_config(options={"prefer": "quality desc"}))
