"""Reading the corpus in each input format, from globs and from the catalog, with the checks
Parquet gets (columns, ids, unreadable files, malformed records); real Spark."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import CorpusSource, list_data_files, read_corpus
from neardup_spark.io.formats import zstd_needs_newer_spark
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus


def clusters_of(out) -> dict[str, str]:
    table = ds.dataset(str(out / "clusters")).to_table()
    return dict(zip(table["doc_id"].to_pylist(), table["cluster_id"].to_pylist(), strict=True))


def write_json_lines(table: pa.Table, path, codec: str | None = None) -> None:
    lines = "".join(json.dumps(row) + "\n" for row in table.to_pylist()).encode()
    with pa.OSFile(str(path), "wb") as raw:
        if codec is None:
            raw.write(lines)
        else:
            with pa.CompressedOutputStream(raw, codec) as out:
                out.write(lines)


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """One generated corpus (with a numeric column) as Parquet and as gzipped JSON lines."""
    root = tmp_path_factory.mktemp("twins")
    table, _ = generate_corpus(200, seed=3, mean_words=40)
    table = table.append_column("quality", pa.array([i % 7 / 7 for i in range(200)]))
    (root / "parquet").mkdir()
    (root / "json").mkdir()
    pq.write_table(table.slice(0, 120), root / "parquet" / "a.parquet")
    pq.write_table(table.slice(120), root / "parquet" / "b.parquet")
    write_json_lines(table.slice(0, 120), root / "json" / "shard-0.jsonl.gz", "gzip")
    write_json_lines(table.slice(120), root / "json" / "shard-1.jsonl.gz", "gzip")
    return root, table


def test_gzipped_json_lines_give_the_clusters_of_their_parquet_twin(spark, twins, tmp_path):
    root, _ = twins
    config = build_config()
    parquet = run(spark, str(root / "parquet"), str(tmp_path / "p"), config)
    told = CorpusSource(str(root / "json"), format="json")
    as_json = run(spark, told, str(tmp_path / "j"), config)
    assert clusters_of(tmp_path / "j") == clusters_of(tmp_path / "p")
    assert parquet["counts"] == as_json["counts"] and parquet["counts"]["removed"] > 0
    assert as_json["input"] == str(root / "json")
    kept = ds.dataset(str(tmp_path / "j" / "deduplicated")).to_table()
    assert set(kept.column_names) == {"id", "text", "quality", "duplicates"}  # Parquet still


def test_the_format_is_told_by_the_file_names_and_globs_are_read(spark, twins):
    root, table = twins
    df, skipped = read_corpus(spark, str(root / "json"))
    assert df.count() == 200 and skipped == []
    assert dict(df.dtypes) == {"id": "string", "text": "string", "quality": "double"}
    glob, _ = read_corpus(spark, str(root / "*" / "shard-1.jsonl.gz"))
    assert glob.count() == 80
    both, _ = read_corpus(spark, CorpusSource(str(root / "p*" / "*.parquet")))
    assert sorted(r["id"] for r in both.select("id").collect()) == table["id"].to_pylist()
    with pytest.raises(UserError, match="input not found: nothing matches"):
        read_corpus(spark, str(root / "nothing-*"))
    with pytest.raises(UserError, match="mixes file formats"):
        read_corpus(spark, str(root / "*"))


def test_a_relative_glob_is_matched_from_the_working_directory(spark, twins, monkeypatch):
    """``neardup dedupe 'json*/*.jsonl.gz' OUT`` run from the corpus's parent: a glob in the
    first segment of a relative path was listed from the root ("nothing matches")."""
    root, _ = twins
    monkeypatch.chdir(root)  # this process's; the suite's JVM keeps its own (the CLI's is ours)
    shards = [f"file:{root / 'json' / f'shard-{n}.jsonl.gz'}" for n in (0, 1)]
    assert list_data_files(spark, "js*/*.jsonl.gz") == (shards, False)
    assert list_data_files(spark, "*/shard-1.jsonl.gz") == (shards[1:], False)


def test_csv_orc_and_a_catalog_table(spark, twins, tmp_path):
    _, table = twins
    small = pa.table(
        {"id": [1, 2, 3], "text": ['a "quoted", text\nover lines', "plain", None], "q": [1, 2, 3]}
    )
    pacsv.write_csv(small, tmp_path / "t.csv")
    df, _ = read_corpus(spark, str(tmp_path / "t.csv"))
    assert dict(df.dtypes) == {"id": "int", "text": "string", "q": "int"}
    assert [r["text"] for r in df.orderBy("id").collect()] == small["text"].to_pylist()
    orc.write_table(small, str(tmp_path / "t.orc"))
    df, _ = read_corpus(spark, CorpusSource(str(tmp_path / "t.orc"), format="orc"))
    assert df.orderBy("id").collect()[0]["text"] == small["text"][0].as_py()
    spark.createDataFrame(table.to_pylist()).createOrReplaceTempView("crawl_view")
    try:
        df, _ = read_corpus(spark, CorpusSource(table="crawl_view"))
        assert df.count() == 200
    finally:
        spark.catalog.dropTempView("crawl_view")
    with pytest.raises(UserError, match="cannot read table no_such_table"):
        read_corpus(spark, CorpusSource(table="no_such_table"))


def test_csv_files_with_other_header_rows_are_refused_not_read_by_position(spark, tmp_path):
    """Spark names CSV columns by the first file's header and reads the others by position: a
    file with its columns in another order would give texts as ids. Refused before any Spark
    job, plain and gzipped alike; files with the same header (an unnamed first column, as
    pandas writes its index) are read."""
    import gzip

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.csv").write_text(',id,text\n0,1,"one, two"\n')
    with gzip.open(tmp_path / "c" / "b.csv.gz", "wt") as handle:
        handle.write(',id,text\n0,2,"three\nfour"\n')
    df, _ = read_corpus(spark, str(tmp_path / "c"))
    assert sorted((r["id"], r["text"]) for r in df.collect()) == [
        (1, "one, two"),
        (2, "three\nfour"),
    ]
    (tmp_path / "c" / "z.csv").write_text('text,id\n"five six",3\n')
    with pytest.raises(
        UserError,
        match=r"different header rows: .*a\.csv has \['', 'id', 'text'\], "
        r".*z\.csv has \['text', 'id'\]",
    ):
        read_corpus(spark, str(tmp_path / "c"))


def test_unreadable_files_and_malformed_records(spark, tmp_path):
    rows = pa.table({"id": ["a", "b"], "text": ["one two", "three four"]})
    (tmp_path / "j").mkdir()
    write_json_lines(rows, tmp_path / "j" / "good.jsonl")
    (tmp_path / "j" / "bad.jsonl").write_text('{"id": "c", "text": "x"}\n{"id": "d", "te\n')
    with pytest.raises(UserError, match=r"1 malformed record\(s\) in .*j \(the first: '\{\"id\""):
        read_corpus(spark, str(tmp_path / "j"))
    df, skipped = read_corpus(spark, str(tmp_path / "j"), skip_corrupt=True)
    assert sorted(r["id"] for r in df.collect()) == ["a", "b", "c"]
    assert skipped == [
        {
            "path": str(tmp_path / "j"),
            "reason": "malformed records",
            "error": "malformed records",
            "records": 1,
        }
    ]
    # A truncated gzip file: named with where it stops (tests/io/test_whole_files.py).
    (tmp_path / "g").mkdir()
    write_json_lines(rows, tmp_path / "g" / "x.jsonl.gz", "gzip")
    data = (tmp_path / "g" / "x.jsonl.gz").read_bytes()
    (tmp_path / "g" / "x.jsonl.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match=r"x\.jsonl\.gz \(JSON lines, gzip\): .*--skip-corrupt"):
        read_corpus(spark, str(tmp_path / "g"))
    (tmp_path / "o").mkdir()
    orc.write_table(rows, str(tmp_path / "o" / "a.orc"))
    (tmp_path / "o" / "b.orc").write_bytes(b"ORC but not really")
    with pytest.raises(UserError, match=r"1 unreadable ORC file\(s\) under .*b\.orc"):
        read_corpus(spark, str(tmp_path / "o"))
    df, skipped = read_corpus(spark, str(tmp_path / "o"), skip_corrupt=True)
    assert df.count() == 2 and [s["path"] for s in skipped] == [f"file:{tmp_path}/o/b.orc"]


def test_zstd_json_lines_are_read_or_refused_by_spark_version(spark, tmp_path):
    rows = pa.table({"id": ["a", "b"], "text": ["one two", "three four"]})
    write_json_lines(rows, tmp_path / "x.jsonl.zst", "zstd")
    # The branch is told by the Spark version, not by the check under test (SPARK-52482: 4.1).
    spark_41 = tuple(int(part) for part in spark.version.split(".")[:2]) >= (4, 1)
    assert (zstd_needs_newer_spark(spark, [str(tmp_path / "x.jsonl.zst")]) is None) == spark_41
    if not spark_41:
        with pytest.raises(UserError, match=r"x\.jsonl\.zst is zstd-compressed, which Spark"):
            read_corpus(spark, str(tmp_path / "x.jsonl.zst"))
    else:  # Spark 4.1 and newer
        df, _ = read_corpus(spark, str(tmp_path / "x.jsonl.zst"))
        assert sorted(r["text"] for r in df.collect()) == ["one two", "three four"]
