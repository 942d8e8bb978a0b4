"""``deduplicated/`` copied from the input files (pipeline/deduplicated_copy.py) by this process
(``driver_copy``, with ``clusters/`` and ``pairs/`` written by it) or by Spark tasks
(``task_copy``): the rows, types and values Spark's writes give (every step placed in Spark),
from every column type it copies; Spark writes ``deduplicated/`` when it would not write the
files' own types back. Each run's recorded plan shows the path it took."""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.pipeline.dedupe import run
from neardup_spark.pipeline.deduplicated_copy import row_group_pieces
from neardup_spark.pipeline.facts import ParquetFileFacts
from neardup_spark.quality.generate import generate_corpus
from tests.nightly.history import canonical, read
from tests.plans import ALL_SPARK, placed, ran
from tests.spark_state import session_conf

N = 240


def typed_table(n: int = N) -> pa.Table:
    """A corpus with near-duplicates and one column of every type copied here, with nulls."""
    corpus, _ = generate_corpus(n, seed=31, mean_words=60)
    rng = np.random.default_rng(3)
    nulls = rng.random(n) < 0.1
    return pa.table(
        {
            "id": pa.array(np.arange(n) * 7, pa.int64()),
            "text": corpus.column("text"),
            "small": pa.array(rng.integers(-100, 100, n), pa.int8(), mask=nulls),
            "count": pa.array(rng.integers(0, 1 << 30, n), pa.int32()),
            "score": pa.array(rng.random(n), pa.float64(), mask=nulls),
            "ratio": pa.array(rng.random(n), pa.float32()),
            "flag": pa.array(rng.random(n) < 0.5, mask=nulls),
            "day": pa.array([datetime.date(2026, 1, 1 + i % 28) for i in range(n)], pa.date32()),
            "url": pa.array([f"https://example.org/{i}" for i in range(n)], pa.large_string()),
            "raw": pa.array([f"{i}".encode() for i in range(n)], pa.binary()),
        }
    )


def write_input(root, table: pa.Table, row_group_size: int = 50) -> str:
    (root / "in").mkdir()
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), root / "in" / "a.parquet", row_group_size=row_group_size)
    pq.write_table(table.slice(half), root / "in" / "b.parquet", row_group_size=row_group_size)
    return str(root / "in")


def test_a_copy_here_equals_sparks_write(spark, tmp_path):
    """Every copied type, nulls, several row groups a file: the same deduplicated/ (rows and
    schema) as Spark writes, and the same clusters and pairs."""
    path = write_input(tmp_path, typed_table())
    outs, reports = {}, {}
    for way, execution in (("here", placed()), ("spark", ALL_SPARK)):
        outs[way] = tmp_path / way
        reports[way] = run(spark, path, str(outs[way]), build_config(), execution=execution)
        assert reports[way]["counts"]["removed"] > 0
    ran(reports["here"], sketch="driver", pairs="driver", components="driver")
    ran(reports["here"], deduplicated="driver_copy")
    ran(reports["spark"], sketch="spark", pairs="spark", components="single_task")
    ran(reports["spark"], deduplicated="spark_join")
    assert reports["here"]["counts"] == reports["spark"]["counts"]
    for name in ("deduplicated", "clusters", "pairs"):
        here, by_spark = read(outs["here"] / name), read(outs["spark"] / name)
        assert canonical(here).equals(canonical(by_spark)), name
        if name == "pairs":  # its nullability: test_pairs_found_here_have_sparks_schema
            continue
        # Written here (no Spark job) in the schema Spark writes, nullability included.
        assert here.schema.remove_metadata() == by_spark.schema.remove_metadata(), name
        files = sorted(p.name for p in (outs["here"] / name).glob("part-*"))
        assert files and all(f.endswith(".parquet") and "-c000" not in f for f in files), name
    copied = read(outs["here"] / "deduplicated")
    assert copied.schema.field("url").type == pa.string()  # as Spark writes a large string
    assert copied.column("small").null_count > 0
    # Copied here: a file a piece (two files, two threads); Spark names its files otherwise.
    names = {
        way: sorted(p.name for p in (out / "deduplicated").glob("part-*"))
        for way, out in outs.items()
    }
    assert names["here"] == ["part-00000.parquet", "part-00001.parquet"]
    assert all("-c000" in name for name in names["spark"])


def test_pairs_found_here_have_sparks_schema(spark, tmp_path):
    """pairs/ written by this process (pairs found here) in the schema the Spark stages'
    run writes, nullability included."""
    path = write_input(tmp_path, typed_table())
    schemas = {}
    for way in ("driver", "spark"):
        report = run(spark, path, str(tmp_path / way), build_config(), execution=placed(pairs=way))
        ran(report, pairs=way)
        schemas[way] = read(tmp_path / way / "pairs").schema.remove_metadata()
    assert schemas["driver"] == schemas["spark"]


def test_a_copy_by_tasks_equals_sparks_write(spark, tmp_path):
    """Clusters found in Spark jobs (not a table here): Spark tasks copy the files, a file
    each, less the removed rows, found at their addresses; the rows and schema Spark writes."""
    path = write_input(tmp_path, typed_table())
    outs, reports = {}, {}
    tasks = placed(pairs="spark", deduplicated="task_copy")
    for way, execution in (("tasks", tasks), ("spark", ALL_SPARK)):
        outs[way] = tmp_path / way
        reports[way] = run(spark, path, str(outs[way]), build_config(), execution=execution)
        assert reports[way]["counts"]["removed"] > 0
    ran(reports["tasks"], pairs="spark", deduplicated="task_copy")
    ran(reports["spark"], pairs="spark", deduplicated="spark_join")
    assert reports["tasks"]["counts"] == reports["spark"]["counts"]
    here, by_spark = read(outs["tasks"] / "deduplicated"), read(outs["spark"] / "deduplicated")
    assert canonical(here).equals(canonical(by_spark))
    assert here.schema.remove_metadata() == by_spark.schema.remove_metadata()
    names = sorted(p.name for p in (outs["tasks"] / "deduplicated").glob("part-*"))
    assert names == ["part-00000.parquet", "part-00001.parquet"]


def test_a_copy_by_tasks_refuses_a_changed_input(spark, tmp_path):
    """A file rewritten between the run's read and its copy (ids moved): an error, not rows
    dropped at the wrong places."""
    from neardup_spark.batch.addressed_texts import FILE_NO, ROW_INDEX
    from neardup_spark.batch.row_copies import DUPLICATES, TASK, FileCopies, copy_files_fn

    table = typed_table(40)
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=10)
    copies = FileCopies(
        (str(tmp_path / "a.parquet"),), ((0,),), "id", table.schema, "snappy", str(tmp_path)
    )
    rows = pa.RecordBatch.from_pydict(
        {
            TASK: pa.array([0, None, None], pa.int32()),
            FILE_NO: pa.array([-1, 0, 0], pa.int32()),
            ROW_INDEX: pa.array([-1, 13, 3], pa.int64()),
            "doc_id": pa.array([None, 13 * 7, 3 * 7], pa.int64()),
            DUPLICATES: pa.nulls(3, pa.int64()),
        }
    )
    (summary,) = copy_files_fn(copies)([rows])
    assert summary.to_pylist() == [{FILE_NO: 0, "copied": 38, "dropped": 2}]
    copied = pq.read_table(tmp_path / "part-00000.parquet")
    assert sorted(copied.column("id").to_pylist()) == [i * 7 for i in range(40) if i not in (3, 13)]
    moved = rows.set_column(3, "doc_id", pa.array([None, 13 * 7, 4 * 7], pa.int64()))
    with pytest.raises(RuntimeError, match="input changed during the run"):
        list(copy_files_fn(copies)([moved]))


@pytest.mark.parametrize("case", ["timestamp", "uint", "partition-column", "lz4-codec"])
def test_spark_writes_what_it_would_not_write_back_alike(spark, tmp_path, case):
    """A column type Spark changes (timestamps, unsigned integers), a column Spark adds (a
    directory's partition value), a codec PyArrow writes otherwise: no copy here, whatever the
    pairs' place; Spark writes ``deduplicated/``, with every row kept."""
    table = typed_table(20)
    if case == "timestamp":
        table = table.append_column("seen", pa.array([datetime.datetime(2026, 1, 1)] * 20))
    if case == "uint":
        table = table.append_column("size", pa.array(range(20), pa.uint32()))
    root = tmp_path / "in"
    where = root / "crawl=1" if case == "partition-column" else root
    where.mkdir(parents=True)
    pq.write_table(table, where / "a.parquet")
    codec = "lz4" if case == "lz4-codec" else "snappy"
    with session_conf(spark, {"spark.sql.parquet.compression.codec": codec}):
        report = run(spark, str(root), str(tmp_path / "out"), build_config())
    ran(report, pairs="driver", components="driver", deduplicated="spark_join")
    assert report["plan"]["deduplicated"]["why"] != "given"
    kept = read(tmp_path / "out" / "deduplicated")
    assert kept.num_rows == table.num_rows - report["counts"]["removed"]
    if case == "lz4-codec":  # the same file is copied with a codec PyArrow writes alike
        again = run(spark, str(root), str(tmp_path / "snappy"), build_config())
        ran(again, deduplicated="driver_copy")
        assert canonical(read(tmp_path / "snappy" / "deduplicated")).equals(canonical(kept))


def test_row_group_pieces_cover_every_row_group_once_in_order(tmp_path):
    table = pa.table({"id": list(range(100))})
    files = []
    for name, rows in (("a", 100), ("b", 10)):
        path = str(tmp_path / f"{name}.parquet")
        pq.write_table(table.slice(0, rows), path, row_group_size=10)
        files.append(ParquetFileFacts.of(path, pq.read_metadata(path), ("id", "text")))
    paths = [f.path for f in files]
    for threads in (1, 2, 4, 32):
        pieces = row_group_pieces(tuple(files), threads)
        flat = [(p, g) for p, groups in pieces for g in groups]
        assert flat == [(paths[0], g) for g in range(10)] + [(paths[1], 0)]
        assert len(pieces) >= min(threads, 11)
