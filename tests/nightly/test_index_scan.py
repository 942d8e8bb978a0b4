"""Filtered reads of the index's docs and pairs: in this process (PyArrow) or as Spark jobs, the
same rows; the driver reads only what the manifest recorded and up to its row limit."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from neardup_spark.columns import CLUSTER_ID, DOC_ID, EXACT_FP
from neardup_spark.nightly.index_scan import IndexTable
from neardup_spark.nightly.integrity import FILES
from neardup_spark.nightly.store import DOCS, FP_A, FP_B, PAIRS, Index
from neardup_spark.runtime.engine import from_arrow
from tests.nightly.history import canonical


@pytest.fixture(scope="module")
def index(spark, history):
    """The history's index after day 3: three segments, documents with several versions."""
    return Index.open(spark, str(history["root"] / "index-after-day3"))


def table_rows(index: Index, table: str) -> int:
    return sum(int(s["rows"].get(table, 0)) for s in index.segments)


def semi_join(spark, column: str, keys: pa.Array):
    """The Spark filter of ``column in keys`` (what the night's scans do)."""
    frame = from_arrow(spark, pa.table({column: keys}))
    return lambda rows: rows.join(frame, column, "left_semi")


@pytest.mark.parametrize("table", [DOCS, PAIRS])
def test_reads_in_this_process_give_the_spark_jobs_rows(spark, index, table):
    on_driver = IndexTable(index, table, table_rows(index, table))
    in_spark = IndexTable(index, table, table_rows(index, table) - 1)
    assert on_driver.on_driver and not in_spark.on_driver
    every = in_spark.frame().collect()
    if table == DOCS:  # some ids, and the members of some clusters (several versions of some)
        column, keys = DOC_ID, pa.array(sorted({r[DOC_ID] for r in every})[::3])
        other, other_keys = CLUSTER_ID, pa.array(sorted({r[CLUSTER_ID] for r in every})[::5])
    else:
        column, keys = FP_A, pa.array(sorted({r[FP_A] for r in every})[::2], pa.int64())
        other, other_keys = FP_B, pa.array(sorted({r[FP_B] for r in every})[::3], pa.int64())
    by_one, by_other = semi_join(spark, column, keys), semi_join(spark, other, other_keys)
    conditions = {
        "one": (by_one, pc.field(column).isin(keys)),
        "either": (
            lambda rows: by_one(rows).unionByName(by_other(rows)).distinct(),
            pc.field(column).isin(keys) | pc.field(other).isin(other_keys),
        ),
        "both": (lambda rows: by_other(by_one(rows)), pc.field(column).isin(keys)
                 & pc.field(other).isin(other_keys)),
    }  # fmt: skip
    for name, (matching, where) in conditions.items():
        here, there = on_driver.rows(matching, where), in_spark.rows(matching, where)
        assert here.num_rows == there.num_rows > 0 or name == "both", name
        assert canonical(here).equals(canonical(there.select(here.column_names))), name
    assert 0 < on_driver.rows(by_one, pc.field(column).isin(keys)).num_rows < len(every)


def test_a_segment_without_recorded_files_is_read_by_spark(spark, index):
    """The driver reads the files each segment recorded; where one recorded none (its driver
    could not list them), Spark reads the table: never a table missing a segment's rows."""
    unrecorded = Index.open(spark, index.root)
    segments = [dict(s) for s in unrecorded.manifest["segments"]]
    segments[-1][FILES] = None
    unrecorded.manifest = {**unrecorded.manifest, "segments": segments}
    assert not IndexTable(unrecorded, DOCS, 10**9).on_driver
    assert IndexTable(index, DOCS, 10**9).on_driver
    ids = pa.array(sorted(r[DOC_ID] for r in index.docs_rows().collect()))
    where = pc.field(DOC_ID).isin(ids)
    every = IndexTable(index, DOCS, 10**9).rows(semi_join(spark, DOC_ID, ids), where)
    assert every.num_rows == table_rows(index, DOCS)  # every segment's rows, all versions
    assert set(every.column(EXACT_FP).to_pylist()) == {
        r[EXACT_FP] for r in index.docs_rows().collect()
    }
