"""``deduplicated/``'s duplicates column (``duplicates_column``): how many removed documents each
kept row stands for, the same on every writer (``driver_copy``, ``task_copy``, ``spark_join``,
``spark_bitmap``) under both cluster rules; and the report's ``removals`` section, the same
whether found here or by Spark jobs. An input column of that name is refused."""

from __future__ import annotations

import collections

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from tests.nightly.history import canonical, read
from tests.plans import placed, ran

N = 300
WRITERS = {
    "driver_copy": placed(),
    "task_copy": placed(pairs="spark", deduplicated="task_copy"),
    "spark_join": placed(sketch="spark", pairs="spark", deduplicated="spark_join"),
    "spark_bitmap": placed(pairs="spark", deduplicated="spark_bitmap"),
}


def corpus_table(n: int = N) -> pa.Table:
    """A corpus with planted near-duplicates and exact copies, and one more column."""
    corpus, _ = generate_corpus(n, seed=5, mean_words=60)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "text": corpus.column("text"),
            "url": pa.array([f"https://example.org/{i}" for i in range(n)]),
        }
    )


def write_input(root, table: pa.Table) -> str:
    (root / "in").mkdir()
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), root / "in" / "a.parquet", row_group_size=60)
    pq.write_table(table.slice(half), root / "in" / "b.parquet", row_group_size=60)
    return str(root / "in")


def expected_duplicates(clusters: pa.Table) -> dict[int, int]:
    """Each document's count of the run's documents whose cluster_id is its id, less one."""
    sizes = collections.Counter(clusters.column("cluster_id").to_pylist())
    return {doc: sizes[doc] - 1 for doc in clusters.column("doc_id").to_pylist()}


class Runs(dict):
    """The corpus deduped under a rule with a writer, ``(rule, writer)`` -> (OUTPUT, report),
    each run when a test first asks for it."""

    def __init__(self, spark, root) -> None:
        super().__init__()
        self.spark, self.root = spark, root
        self.path = write_input(root, corpus_table())

    def __missing__(self, key: tuple[str, str]) -> tuple:
        rule, where = key
        target = self.root / f"{rule}-{where}"
        config = build_config(options={"cluster_rule": rule})
        report = run(self.spark, self.path, str(target), config, execution=WRITERS[where])
        ran(report, deduplicated=where)
        self[key] = (target, report)
        return self[key]


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    return Runs(spark, tmp_path_factory.mktemp("duplicates"))


@pytest.mark.parametrize(
    "rule", [pytest.param("components", marks=pytest.mark.extended), "anchored"]
)
def test_every_writer_gives_the_same_duplicates(runs, rule):
    """Every kept row counts its cluster's documents less one; the four writers agree, row for
    row and type for type (int64, never null)."""
    target, report = runs[rule, "spark_join"]
    reference = read(target / "deduplicated")
    assert reference.column_names == ["id", "text", "url", "duplicates"]
    field = reference.schema.field("duplicates")
    assert field.type == pa.int64() and not field.nullable
    expected = expected_duplicates(read(target / "clusters"))
    got = dict(zip(reference["id"].to_pylist(), reference["duplicates"].to_pylist(), strict=True))
    assert got == {doc: expected[doc] for doc in got}
    assert max(got.values()) >= 2  # a cluster of three documents at least
    assert sum(n + 1 for n in got.values()) == N
    assert report["counts"]["removed"] == sum(got.values()) > 0
    for where in WRITERS:
        written = read(runs[rule, where][0] / "deduplicated")
        assert canonical(written).equals(canonical(reference)), where
        assert written.schema.remove_metadata() == reference.schema.remove_metadata(), where


@pytest.mark.parametrize("rule", ["components", "anchored"])
def test_the_removals_section_is_the_same_here_and_in_spark(runs, rule):
    """The report's removals, from clusters/ found here and from Spark jobs: the largest
    clusters as clusters/ gives them, the histogram of the removed documents' similarity
    (anchored) holding every removed document, the components rule's count beside."""
    here, spark_report = runs[rule, "driver_copy"][1], runs[rule, "spark_join"][1]
    ran(here, components="driver")
    ran(spark_report, pairs="spark")
    section = here["removals"]
    assert section == spark_report["removals"]
    assert section["cluster_rule"] == rule
    assert section["removed"] == here["counts"]["removed"]
    clusters = read(runs[rule, "driver_copy"][0] / "clusters")
    sizes = collections.Counter(clusters.column("cluster_id").to_pylist())
    largest = sorted(((-n, c) for c, n in sizes.items() if n > 1))[:10]
    assert [(c["cluster_id"], c["size"]) for c in section["largest_clusters"]] == [
        (c, -n) for n, c in largest
    ]
    similarity = section["similarity"]
    if rule == "components":
        assert similarity is None
        assert section["removed_by_components"] == section["removed"]
        return
    assert section["removed_by_components"] == here["counts"]["removed_by_components"]
    assert section["removed_by_components"] >= section["removed"]
    assert similarity["edges"] == [0.8, 0.85, 0.9, 0.95, 1.0]
    assert similarity["total"] == sum(similarity["counts"]) == section["removed"]
    assert similarity["below"] == 0
    removed = clusters.filter(pa.compute.invert(clusters["is_representative"]))
    exact = sum(1 for s in removed["similarity"].to_pylist() if s == 1.0)
    assert similarity["counts"][-1] >= exact


def test_the_column_is_named_by_its_setting_or_left_out(spark, tmp_path):
    path = write_input(tmp_path, corpus_table(80))
    for name, columns in (("copies", ["id", "text", "url", "copies"]), ("", ["id", "text", "url"])):
        for where in ("driver_copy", "spark_join"):
            out = tmp_path / f"out-{name or 'none'}-{where}"
            config = build_config(options={"duplicates_column": name})
            report = run(spark, path, str(out), config, execution=WRITERS[where])
            ran(report, deduplicated=where)
            assert read(out / "deduplicated").column_names == columns, (name, where)


@pytest.mark.parametrize("taken", ["duplicates", "Duplicates"])
def test_an_input_column_of_its_name_is_refused(spark, tmp_path, taken):
    """Not overwritten, not a Spark error: a user error naming the setting, before any job."""
    table = corpus_table(40).append_column(taken, pa.array([1] * 40))
    path = write_input(tmp_path, table)
    with pytest.raises(UserError, match="duplicates_column"):
        run(spark, path, str(tmp_path / "out"), build_config())
    renamed = build_config(options={"duplicates_column": "n_removed"})
    run(spark, path, str(tmp_path / "renamed"), renamed)
    kept = read(tmp_path / "renamed" / "deduplicated")
    assert kept.column_names == ["id", "text", "url", taken, "n_removed"]
