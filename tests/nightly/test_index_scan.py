"""Filtered reads of the index's docs and pairs: in this process (PyArrow) or as Spark jobs, the
same rows, as the plan places each table's scan; the driver reads only what the manifest
recorded and up to its row limit. A night's filters are declared once (``index_filters``) and
give the same rows rendered to PyArrow and to Spark."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from neardup_spark.columns import CLUSTER_ID, DOC_ID, EXACT_FP
from neardup_spark.config import ExecutionSettings
from neardup_spark.errors import UserError
from neardup_spark.nightly.index_filters import AllOf, AnyOf, Filter, IsIn, NotIn
from neardup_spark.nightly.index_scan import IndexTable
from neardup_spark.nightly.integrity import FILES
from neardup_spark.nightly.store import DOCS, FP_A, FP_B, PAIRS, Index
from neardup_spark.pipeline.facts import InputFacts, RunFacts
from neardup_spark.pipeline.plan import Plan
from neardup_spark.runtime.engine import from_arrow
from neardup_spark.runtime.spark_compat import to_arrow
from tests.nightly.history import canonical


@pytest.fixture(scope="module")
def index(spark, history):
    """The history's index after day 3: three segments, documents with several versions."""
    return Index.open(spark, str(history["root"] / "index-after-day3"))


def table_rows(index: Index, table: str) -> int:
    return sum(int(s["rows"].get(table, 0)) for s in index.segments)


def night_plan(settings: ExecutionSettings) -> Plan:
    """A night's plan (its scans' choices need no facts of its input)."""
    return Plan(RunFacts(InputFacts("batch")), settings)


def scan(index: Index, table: str, where: str) -> IndexTable:
    """``table`` scanned where a plan given that choice places it (and records it)."""
    plan = night_plan(ExecutionSettings(plan={f"{table}_scan": where}))
    scanned = IndexTable(index, table, plan)
    assert plan.where(f"{table}_scan") == where
    return scanned


def as_set(table: pa.Table) -> pa.Table:
    """The rows once each (a Spark job may return a row more than once), sorted."""
    columns = sorted(table.column_names)
    return canonical(table.select(columns).group_by(columns).aggregate([]).select(columns))


def filters(every: list, table: str) -> dict[str, Filter]:
    """The shapes of a night's filters over ``table``'s ``every`` rows."""
    if table == DOCS:  # some ids, and the members of some clusters (several versions of some)
        column, keys = DOC_ID, pa.array(sorted({r[DOC_ID] for r in every})[::3])
        other, other_keys = CLUSTER_ID, pa.array(sorted({r[CLUSTER_ID] for r in every})[::5])
    else:
        column, keys = FP_A, pa.array(sorted({r[FP_A] for r in every})[::2], pa.int64())
        other, other_keys = FP_B, pa.array(sorted({r[FP_B] for r in every})[::3], pa.int64())
    one, by_other = IsIn(column, keys), IsIn(other, other_keys)
    return {
        "one": one,
        "either": AnyOf(one, by_other),
        "both": AllOf(one, by_other),
        "one_not_other": AllOf(by_other, NotIn(column, keys)),
        "nested": AnyOf(AllOf(one, NotIn(other, other_keys)), by_other),
    }


@pytest.mark.parametrize("table", [DOCS, PAIRS])
def test_the_scan_limit_is_the_tables_rows(index, table):
    """Up to ``nightly_driver_scan_max_rows`` rows a table is scanned here, above it by a
    Spark job; the choice and its reason go into the night's plan."""
    rows = table_rows(index, table)
    at = night_plan(ExecutionSettings(nightly_driver_scan_max_rows=rows))
    assert IndexTable(index, table, at).on_driver
    assert at.section()[f"{table}_scan"] == {
        "where": "driver",
        "why": f"{rows:,} rows <= nightly_driver_scan_max_rows {rows:,}",
    }
    below = night_plan(ExecutionSettings(nightly_driver_scan_max_rows=rows - 1))
    assert not IndexTable(index, table, below).on_driver
    assert below.where(f"{table}_scan") == "spark"


@pytest.mark.parametrize("table", [DOCS, PAIRS])
def test_reads_in_this_process_give_the_spark_jobs_rows(index, table):
    on_driver, in_spark = scan(index, table, "driver"), scan(index, table, "spark")
    assert on_driver.on_driver and not in_spark.on_driver
    every = in_spark.frame().collect()
    for name, where in filters(every, table).items():
        here, there = on_driver.rows(where), in_spark.rows(where)
        assert here.num_rows > 0 or name == "both", name
        assert as_set(here).equals(as_set(there)), name
        assert here.num_rows == as_set(here).num_rows, name  # PyArrow: each row once
    assert 0 < on_driver.rows(filters(every, table)["one"]).num_rows < len(every)


@pytest.mark.parametrize("table", [DOCS, PAIRS])
def test_a_filter_rendered_to_pyarrow_and_to_spark_keeps_the_same_rows(spark, index, table):
    """Each filter on the table's rows in memory: ``Table.filter(where.arrow())`` against
    ``where.spark(frame)`` on a DataFrame of the same rows."""
    rows = to_arrow(index.docs_rows() if table == DOCS else index.pairs())
    frame = from_arrow(spark, rows)
    for name, where in filters(rows.to_pylist(), table).items():
        here, there = rows.filter(where.arrow()), to_arrow(where.spark(frame))
        assert as_set(here).equals(as_set(there)), name


def test_empty_keys_keep_nothing_or_everything(spark):
    """A night with no key of a kind: ``IsIn`` keeps no row, ``NotIn`` every row, both ways."""
    rows = pa.table({DOC_ID: ["a", "b"], EXACT_FP: pa.array([1, 2], pa.int64())})
    frame = from_arrow(spark, rows)
    none = pa.array([], pa.string())
    for where, kept in ((IsIn(DOC_ID, none), 0), (NotIn(DOC_ID, none), 2)):
        assert rows.filter(where.arrow()).num_rows == kept
        assert where.spark(frame).count() == kept


def test_a_segment_without_recorded_files_is_read_by_spark(spark, index):
    """The driver reads the files each segment recorded; where one recorded none (its driver
    could not list them), Spark reads the table: never a table missing a segment's rows. A
    choice of the driver given for it is refused."""
    unrecorded = Index.open(spark, index.root)
    segments = [dict(s) for s in unrecorded.manifest["segments"]]
    segments[-1][FILES] = None
    unrecorded.manifest = {**unrecorded.manifest, "segments": segments}
    plan = night_plan(ExecutionSettings())
    assert not IndexTable(unrecorded, DOCS, plan).on_driver
    assert plan.section()["docs_scan"] == {
        "where": "spark",
        "why": "its files were not recorded where this process reads",
    }
    with pytest.raises(UserError, match="docs_scan=driver is not possible"):
        IndexTable(unrecorded, DOCS, night_plan(ExecutionSettings(plan={"docs_scan": "driver"})))
    ids = pa.array(sorted(r[DOC_ID] for r in index.docs_rows().collect()))
    every = scan(index, DOCS, "driver").rows(IsIn(DOC_ID, ids))
    assert every.num_rows == table_rows(index, DOCS)  # every segment's rows, all versions
    assert set(every.column(EXACT_FP).to_pylist()) == {
        r[EXACT_FP] for r in index.docs_rows().collect()
    }
    assert pc.count_distinct(every.column(DOC_ID)).as_py() < every.num_rows
