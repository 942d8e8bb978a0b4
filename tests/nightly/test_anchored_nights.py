"""Nights under the anchored rule (the default): chains of revised documents spread over three
nights, indexed night by night on each path, equal a full run over every night's documents in
the keep order (night, then id), given as ``--prefer "night asc"``; every removal of a night
is justified by a pair with the document kept in its place; an index of the other rule is
refused with the remedy."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.nightly.run import run_incremental
from neardup_spark.pipeline.dedupe import run
from tests.nightly.history import (
    BUCKETS,
    DISTRIBUTED,
    DRIVER_PATH,
    assignment,
    index_assignment,
    read,
)
from tests.plans import ran
from tests.revisions import NIGHTS, revision_chains

# Every step of a night on the driver; or as Spark jobs, its clusters by the Spark twin, over
# components labelled in distributed rounds (the single task's labels: tests/nightly/test_paths.py
# and the full runs' tests).
PATHS = {"driver": DRIVER_PATH, "distributed": DISTRIBUTED}


@pytest.fixture(scope="module")
def chains(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("anchored-nights")
    corpus = revision_chains(chains=30, versions=7, unrelated=60, seed=11)
    for night in range(1, NIGHTS + 1):
        (root / f"night{night}").mkdir()
        part = corpus.filter(pa.compute.equal(corpus.column("night"), night))
        pq.write_table(part, root / f"night{night}" / "part-0.parquet")
    (root / "all").mkdir()
    pq.write_table(corpus, root / "all" / "part-0.parquet")
    full = run(
        spark,
        str(root / "all"),
        str(root / "full"),
        build_config(options={"prefer": "night asc"}),
    )
    return {"root": root, "full": full}


def nights(spark, root: Path, name: str, execution) -> tuple[Path, list[dict]]:
    index, reports = root / f"index-{name}", []
    for night in range(1, NIGHTS + 1):
        reports.append(
            run_incremental(
                spark,
                str(root / f"night{night}"),
                str(root / f"out-{name}-{night}"),
                str(index),
                build_config(),
                buckets=BUCKETS,
                execution=execution,
            )
        )
    return index, reports


@pytest.mark.parametrize("path", sorted(PATHS))
def test_nights_equal_the_full_run_in_keep_order(spark, chains, path):
    root = chains["root"]
    index, reports = nights(spark, root, path, PATHS[path])
    assert all(r["cluster_rule"] == "anchored" for r in reports)
    if path == "distributed":
        ran(reports[-1], night_components="spark")
        assert reports[-1]["components"]["strategy"] == "distributed"
    full = assignment(root / "full" / "clusters")
    assert chains["full"]["cluster_rule"] == "anchored"
    removed = sum(1 for d, c in full.items() if d != c)
    assert removed > 30  # the chains lose versions: the test has something to compare
    assert index_assignment(spark, index) == full
    for night in range(1, NIGHTS + 1):
        out = root / f"out-{path}-{night}"
        clusters = read(out / "clusters").to_pylist()
        pairs = read(out / "pairs")
        held = set(
            zip(pairs.column("doc_a").to_pylist(), pairs.column("doc_b").to_pylist(), strict=False)
        )
        for row in clusters:
            doc, kept = row["doc_id"], row["cluster_id"]
            assert row["is_representative"] == (doc == kept)
            if doc != kept:  # justified in pairs/, at the threshold
                assert (min(doc, kept), max(doc, kept)) in held
                assert row["similarity"] >= 0.8


def test_an_index_of_the_other_rule_is_refused_with_the_remedy(spark, chains, tmp_path):
    root = chains["root"]
    index = tmp_path / "index"
    components = build_config(options={"cluster_rule": "components"})
    run_incremental(spark, str(root / "night1"), str(tmp_path / "o1"), str(index), components)
    with pytest.raises(UserError, match=r"cluster rule .*--cluster-rule components"):
        run_incremental(
            spark, str(root / "night2"), str(tmp_path / "o2"), str(index), build_config()
        )
