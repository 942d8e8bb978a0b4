"""Every input column keeps its type in ``deduplicated/`` (both ways it is written: a join with
the removed ids, and the bitmap-filtered scan above the broadcast limit; and a nightly batch's),
or changes as docs/operations/types-and-security.md says; types Spark cannot read are a user
error naming the column, not a stack trace."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import SessionSettings, build_config
from neardup_spark.errors import UserError
from neardup_spark.nightly.run import run_incremental
from neardup_spark.pipeline.dedupe import run
from neardup_spark.redaction import REDACTED
from tests.plans import placed, ran

ROWS = 8
TEXT = " ".join(f"word{i}" for i in range(100))
OTHER = " ".join(f"term{i}" for i in range(100))
# Rows 1 and 3 are near-duplicates of rows 0 and 2 (removed); rows 4 and 6 hold the nulls.
TEXTS = [
    TEXT,
    TEXT.replace("word50", "other"),
    OTHER,
    OTHER.replace("term50", "other"),
    "a third unrelated document with its own words " * 3,
    "fourth text that shares nothing with the others " * 3,
    "fifth sample of distinct wording for a singleton " * 3,
    "sixth and last row holding yet other words here " * 3,
]
KEPT = [0, 2, 4, 5, 6, 7]
NULL_ROWS = {4, 6}
MOMENT = dt.datetime(2024, 5, 6, 7, 8, 9, 123456)


def values(make, null_rows=NULL_ROWS):
    return [None if i in null_rows else make(i) for i in range(ROWS)]


def moment(i: int) -> dt.datetime:
    return MOMENT + dt.timedelta(days=i, microseconds=i)


def utc_moment(i: int) -> dt.datetime:
    return moment(i).replace(tzinfo=dt.timezone.utc)


# name -> (input array, the type pyarrow reads back from deduplicated/ when it changes)
COLUMNS: dict[str, tuple[pa.Array, pa.DataType | None]] = {
    "ts_us_utc": (pa.array(values(utc_moment), pa.timestamp("us", tz="UTC")), None),
    "ts_us_ntz": (pa.array(values(moment), pa.timestamp("us")), None),
    "ts_ms_utc": (
        pa.array(values(lambda i: utc_moment(i).replace(microsecond=0)), pa.timestamp("ms", "UTC")),
        pa.timestamp("us", tz="UTC"),
    ),
    "ts_us_paris": (
        pa.array(values(utc_moment), pa.timestamp("us", tz="Europe/Paris")),
        pa.timestamp("us", tz="UTC"),
    ),
    "date32": (pa.array(values(lambda i: dt.date(2024, 1, 1 + i)), pa.date32()), None),
    "date64": (pa.array(values(lambda i: dt.date(2024, 1, 1 + i)), pa.date64()), pa.date32()),
    "dec_10_3": (
        pa.array(values(lambda i: decimal.Decimal(f"{i}.125")), pa.decimal128(10, 3)),
        None,
    ),
    "dec_38_2": (
        pa.array(values(lambda i: decimal.Decimal("9" * 36 + f".{i:02d}")), pa.decimal128(38, 2)),
        None,
    ),
    "bool": (pa.array(values(lambda i: i % 2 == 0), pa.bool_()), None),
    "int8": (pa.array(values(lambda i: -128 + i), pa.int8()), None),
    "int16": (pa.array(values(lambda i: -32768 + i), pa.int16()), None),
    "int32": (pa.array(values(lambda i: -(2**31) + i), pa.int32()), None),
    "int64": (pa.array(values(lambda i: -(2**63) + i), pa.int64()), None),
    "float32": (pa.array(values(lambda i: i + 0.5), pa.float32()), None),
    "float64": (pa.array(values(lambda i: i / 3), pa.float64()), None),
    "uint8": (pa.array(values(lambda i: 255 - i), pa.uint8()), pa.int16()),
    "uint16": (pa.array(values(lambda i: 65535 - i), pa.uint16()), pa.int32()),
    "uint32": (pa.array(values(lambda i: 2**32 - 1 - i), pa.uint32()), pa.int64()),
    "uint64": (pa.array(values(lambda i: 2**64 - 1 - i), pa.uint64()), pa.decimal128(20, 0)),
    "binary": (pa.array(values(lambda i: bytes([i, 0, 255])), pa.binary()), None),
    "fixed_binary": (pa.array(values(lambda i: bytes([i, 1])), pa.binary(2)), pa.binary()),
    "large_binary": (pa.array(values(lambda i: b"x" * i), pa.large_binary()), pa.binary()),
    "string": (pa.array(values(lambda i: f"s{i}"), pa.string()), None),
    "large_string": (pa.array(values(lambda i: f"L{i}"), pa.large_string()), pa.string()),
    "dictionary": (
        pa.array(values(lambda i: f"d{i % 2}")).dictionary_encode(),
        pa.string(),
    ),
    "list": (pa.array(values(lambda i: [i, None, -i]), pa.list_(pa.int32())), None),
    "large_list": (
        pa.array(values(lambda i: [i]), pa.large_list(pa.int32())),
        pa.list_(pa.field("element", pa.int32())),
    ),
    "map": (pa.array(values(lambda i: [("k", i)]), pa.map_(pa.string(), pa.int64())), None),
    "struct": (
        pa.array(
            values(lambda i: {"a": i, "b": f"b{i}", "at": utc_moment(i)}),
            pa.struct([("a", pa.int32()), ("b", pa.string()), ("at", pa.timestamp("us", "UTC"))]),
        ),
        None,
    ),
    "duration": (
        pa.array(values(lambda i: dt.timedelta(microseconds=i)), pa.duration("us")),
        pa.int64(),
    ),
    "null": (pa.nulls(ROWS), pa.int32()),
}


def input_table() -> pa.Table:
    columns = {
        "id": pa.array(range(ROWS), pa.int64()),
        "text": pa.array(TEXTS),
        **{name: array for name, (array, _) in COLUMNS.items()},
    }
    return pa.table(columns)


def same_type(got: pa.DataType, want: pa.DataType) -> bool:
    """Type equality, ignoring the names Parquet gives list elements and map entries."""
    return got.equals(want) or str(got).split(" (")[0] == str(want).split(" (")[0]


def expected_value(name: str, value):
    if value is None:
        return None
    if name == "duration":  # carried as int64 microseconds
        return value // dt.timedelta(microseconds=1)
    if name == "uint64":
        return decimal.Decimal(value)
    return value


def check_round_trip(path, written: pa.Table) -> None:
    """``path`` (deduplicated/) holds the kept rows of ``written`` with every column's type
    (or its documented replacement) and values."""
    got = pq.read_table(str(path)).sort_by("id")
    assert got.column("id").to_pylist() == KEPT
    assert got.schema.names == [*written.schema.names, "duplicates"]
    # each kept row's removed documents: the removed, all told
    assert sum(got.column("duplicates").to_pylist()) == written.num_rows - len(KEPT)
    for name in written.schema.names:
        want_type = COLUMNS[name][1] if name in COLUMNS else None
        want_type = want_type or written.schema.field(name).type
        got_type = got.schema.field(name).type
        assert same_type(got_type, want_type), f"{name}: {got_type} != {want_type}"
        want = [expected_value(name, written.column(name)[i].as_py()) for i in KEPT]
        assert got.column(name).to_pylist() == want, name


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("all-types")
    pq.write_table(input_table(), root / "part-0.parquet")
    # What pyarrow reads back from the input file itself: the reference for deduplicated/.
    return root, pq.read_table(root / "part-0.parquet")


def test_deduplicated_keeps_every_column_type(spark, corpus, tmp_path):
    root, written = corpus
    report = run(spark, str(root), str(tmp_path / "out"), build_config())
    assert report["counts"]["removed"] == 2
    # Types a copy would not write as Spark does: Spark's anti-join writes deduplicated/.
    ran(report, deduplicated="spark_join")
    assert report["plan"]["deduplicated"]["why"] != "given"
    check_round_trip(tmp_path / "out" / "deduplicated", written)


def test_above_the_broadcast_limit_the_types_are_the_same(spark, corpus, tmp_path):
    """deduplicated/ through the bitmap scan of the input (the removed ids too many to
    broadcast)."""
    root, written = corpus
    execution = placed(deduplicated="spark_bitmap")
    report = run(spark, str(root), str(tmp_path / "out"), build_config(), execution=execution)
    ran(report, deduplicated="spark_bitmap")
    check_round_trip(tmp_path / "out" / "deduplicated", written)


def test_a_nights_deduplicated_keeps_the_types_and_no_secret(spark, corpus, tmp_path):
    """A nightly batch (a new index) publishes the same types; a secret Spark setting of the
    session is in neither the index nor OUTPUT."""
    root, written = corpus
    secret = "NIGHTSECRET918"
    session = SessionSettings(spark={"spark.hadoop.fs.s3a.secret.key": secret})
    out, index = tmp_path / "out", tmp_path / "index"
    report = run_incremental(
        spark, str(root), str(out), str(index), build_config(), session=session
    )
    assert report["config"]["spark"] == {"spark.hadoop.fs.s3a.secret.key": REDACTED}
    check_round_trip(out / "deduplicated", written)
    for path in [*out.rglob("*"), *index.rglob("*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    "column",
    [
        pa.array([MOMENT, None], pa.timestamp("ns", tz="UTC")),
        pa.array([MOMENT, None], pa.timestamp("ns")),
        pa.array([dt.time(1, 2, 3), None], pa.time64("us")),
    ],
    ids=["timestamp_ns_utc", "timestamp_ns", "time64"],
)
def test_a_type_spark_cannot_read_is_a_user_error_naming_the_column(spark, tmp_path, column):
    table = pa.table({"id": [1, 2], "text": ["a b c", "d e f"], "when": column})
    pq.write_table(table, tmp_path / "in.parquet")
    with pytest.raises(UserError) as caught:
        run(spark, str(tmp_path / "in.parquet"), str(tmp_path / "out"), build_config())
    message = str(caught.value)
    assert f"'when' ({column.type})" in message and "Spark cannot read" in message
