"""The rows a Parquet or ORC input's footers give are carried from its read (no footer read
again) and checked against the rows a run reads: a reader that loses rows (a file gone under a
run read with ``spark.sql.files.ignoreMissingFiles``) is an error naming both numbers, in the
full run, the nightly run and ``neardup boilerplate``."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import DedupeConfig
from neardup_spark.errors import InputChanged
from neardup_spark.io import corpus, schemas
from neardup_spark.io.corpus import CorpusSource, read_corpus
from neardup_spark.io.footer_rows import check_rows_read, footer_rows
from neardup_spark.nightly.run import run_incremental
from neardup_spark.pipeline.boilerplate import run_boilerplate
from neardup_spark.pipeline.dedupe import run
from tests.cli.test_whole_files import assert_plain, error_line, here
from tests.damaged_files import pages
from tests.plans import placed, ran


def parquet_dir(root: Path, sizes: tuple[int, ...] = (30, 20)) -> Path:
    root.mkdir()
    first = 0
    for number, size in enumerate(sizes):
        pq.write_table(pages(first, size), root / f"part-{number}.parquet")
        first += size
    return root


def test_footer_rows_are_those_of_the_files_read(spark, tmp_path, monkeypatch):
    reads: list[str] = []
    real = schemas.read_footer
    monkeypatch.setattr(
        schemas, "read_footer", lambda p, f="parquet": reads.append(p) or real(p, f)
    )
    df, _ = read_corpus(spark, str(parquet_dir(tmp_path / "p")))
    assert footer_rows(df) == df.count() == 50
    assert len(reads) == 2  # each footer read once, by the check every read does anyway
    (tmp_path / "o").mkdir()
    orc.write_table(pages(0, 7), tmp_path / "o" / "x.orc")
    df, _ = read_corpus(spark, CorpusSource(str(tmp_path / "o"), format="orc"))
    assert footer_rows(df) == 7
    (tmp_path / "j").mkdir()
    rows = "".join(json.dumps(r) + "\n" for r in pages(0, 5).to_pylist())
    (tmp_path / "j" / "a.jsonl.gz").write_bytes(gzip.compress(rows.encode()))
    df, _ = read_corpus(spark, str(tmp_path / "j"))
    assert footer_rows(df) is None  # JSON lines say nothing of their rows before a read


def test_skipped_files_do_not_count(spark, tmp_path):
    root = parquet_dir(tmp_path / "p")
    (root / "cut.parquet").write_bytes((root / "part-0.parquet").read_bytes()[:100])
    df, skipped = read_corpus(spark, str(root), skip_corrupt=True)
    assert [Path(s["path"]).name for s in skipped] == ["cut.parquet"]
    assert footer_rows(df) == df.count() == 50


def test_a_difference_names_both_numbers():
    check_rows_read(50, 50, "in/")
    check_rows_read(None, 3, "in/")
    with pytest.raises(InputChanged, match=r"49 rows were read from in/ .* give 50 \(1 fewer\)"):
        check_rows_read(50, 49, "in/")


@pytest.fixture
def losing_reader(spark, monkeypatch):
    """Reads after which one input file is deleted, with Spark told to ignore missing files: the
    run's reader then loses that file's rows without an error."""
    real = corpus.read_corpus

    def read_then_lose_a_file(*args, **kwargs):
        df, skipped = real(*args, **kwargs)
        for name in df.inputFiles()[:1]:
            Path(name.removeprefix("file:").removeprefix("//")).unlink()
        return df, skipped

    for module in ("pipeline.dedupe", "nightly.run", "pipeline.boilerplate"):
        monkeypatch.setattr(
            sys.modules[f"neardup_spark.{module}"], "read_corpus", read_then_lose_a_file
        )
    spark.conf.set("spark.sql.files.ignoreMissingFiles", "true")
    yield
    spark.conf.unset("spark.sql.files.ignoreMissingFiles")


# Read by Spark's reader (the files are not read by this process).
SPARK_READS = placed(sketch="spark")
LOST = r"rows were read from .* but its files' footers give 50 \(\d+ fewer\)"


def test_rows_lost_by_a_reader_fail_every_run(spark, tmp_path, losing_reader):
    with pytest.raises(InputChanged, match=LOST):
        run(
            spark, str(parquet_dir(tmp_path / "a")), str(tmp_path / "out"), DedupeConfig(),
            execution=SPARK_READS,
        )  # fmt: skip
    assert not (tmp_path / "out" / "_SUCCESS").exists()
    with pytest.raises(InputChanged, match=LOST.replace("from .*", "from the batch's input files")):
        run_incremental(
            spark, str(parquet_dir(tmp_path / "b")), str(tmp_path / "night"),
            str(tmp_path / "index"), DedupeConfig(), execution=SPARK_READS,
        )  # fmt: skip
    assert not (tmp_path / "night" / "_SUCCESS").exists()
    with pytest.raises(InputChanged, match=LOST):
        run_boilerplate(
            spark, str(parquet_dir(tmp_path / "c")), str(tmp_path / "clean"), DedupeConfig()
        )
    assert not (tmp_path / "clean" / "_SUCCESS").exists()


def test_a_whole_read_passes(spark, tmp_path):
    table = pa.concat_tables([pages(0, 30), pages(30, 20)])
    root = parquet_dir(tmp_path / "a")
    report = run(spark, str(root), str(tmp_path / "out"), DedupeConfig(), execution=SPARK_READS)
    assert report["counts"]["input_rows"] == table.num_rows
    ran(report, sketch="spark")


def test_the_command_line_says_it_in_one_line(spark, tmp_path, capfd, losing_reader):
    root, out = parquet_dir(tmp_path / "a"), tmp_path / "out"
    args = ("dedupe", str(root), str(out), "--set", "plan.sketch=spark")
    code, err = here(spark, capfd, *args)
    assert code == 1, err  # the input changed under the run: a run on it as it is may succeed
    assert re.search(LOST, error_line(err)), err
    assert_plain(err)
