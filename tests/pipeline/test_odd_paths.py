"""Paths as users have them: spaces, non-ASCII letters, ``%``, ``#``, ``=``, ``,`` and ``:`` in
the names of INPUT, OUTPUT, ``--index`` and ingest paths, as plain paths and as ``file:`` URIs
(docs/operations/paths-and-schemas.md). Each run must give what the same run gives under a
plain name."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.ingest.job import ingest
from neardup_spark.nightly.run import run_incremental
from neardup_spark.pipeline.dedupe import run
from tests.plans import ALL_SPARK, placed, ran

ODD_CHARACTERS = (" ", "é", "%", "#", "=", ",", ":")
# One name holding them all (a directory called "a=b" at the root of INPUT is a name, not a
# partition directory: partitions are discovered below the root only).
ALL_ODD = "my corpus é%20#x=1,2:3"
GROUPS, COPIES = 8, 4


def corpus_table(offset: int = 0) -> pa.Table:
    """GROUPS groups of COPIES near-duplicates (one word changed), ids from ``offset``."""
    ids, texts = [], []
    for group in range(GROUPS):
        base = [f"g{group}w{i}" for i in range(40)]
        for copy in range(COPIES):
            words = list(base)
            words[copy] = f"edit{copy}"
            ids.append(offset + group * COPIES + copy)
            texts.append(" ".join(words))
    return pa.table({"id": ids, "text": texts})


def write_corpus(directory: Path, offset: int = 0) -> Path:
    directory.mkdir(parents=True)
    pq.write_table(corpus_table(offset), directory / "part-0.parquet")
    return directory


def uri(path: Path) -> str:
    return "file://" + str(path)


def clusters(out: Path) -> set[frozenset]:
    table = ds.dataset(str(out / "clusters")).to_table()
    groups: dict = {}
    for doc, cluster in zip(
        table.column("doc_id").to_pylist(), table.column("cluster_id").to_pylist(), strict=True
    ):
        groups.setdefault(cluster, set()).add(doc)
    return {frozenset(g) for g in groups.values() if len(g) > 1}


@pytest.fixture(scope="module")
def plain_run(spark, tmp_path_factory) -> set[frozenset]:
    root = tmp_path_factory.mktemp("plain")
    run(spark, str(write_corpus(root / "corpus")), str(root / "out"), build_config())
    found = clusters(root / "out")
    assert len(found) == GROUPS  # the corpus has its near-duplicates
    return found


@pytest.mark.parametrize("char", ODD_CHARACTERS)
def test_dedupe_with_odd_names(spark, tmp_path, plain_run, char):
    """INPUT and OUTPUT hold ``char`` in two names each; one of them given as a ``file:`` URI,
    the other as a plain path (the other way round for every second character), every step in
    this process, or every step in Spark (every second character)."""
    corpus = write_corpus(tmp_path / f"in{char}put" / f"day{char}1")
    out = tmp_path / f"out{char}put" / f"run{char}1"
    as_uri = ODD_CHARACTERS.index(char) % 2 == 0
    given_in, given_out = (str(corpus), uri(out)) if as_uri else (uri(corpus), str(out))
    execution = ALL_SPARK if as_uri else placed(sketch="driver", pairs="driver")
    report = run(spark, given_in, given_out, build_config(), execution=execution)
    ran(report, **execution.plan)
    assert (out / "_SUCCESS").exists() and clusters(out) == plain_run
    manifest = json.loads((out / "manifest.json").read_text())
    listed = [f["path"] for f in manifest["input_files"]]
    assert listed == [f"file:{corpus}/part-0.parquet"]  # decoded, as Hadoop names it
    assert report["counts"]["input_rows"] == GROUPS * COPIES


def test_nightly_with_odd_names(spark, tmp_path):
    """Two nights, INPUT given as a ``file:`` URI, OUTPUT and ``--index`` as plain paths, every
    name holding all the odd characters; the second night's copies join the first's clusters."""
    root = tmp_path / ALL_ODD
    index = root / f"index {ALL_ODD}"
    config = build_config()
    first = run_incremental(
        spark, uri(write_corpus(root / "day1")), str(root / "out1"), str(index), config
    )
    second = run_incremental(
        spark,
        uri(write_corpus(root / "day2", offset=1000)),
        str(root / "out2"),
        uri(index),
        config,
    )
    assert first["counts"]["input_rows"] == second["counts"]["input_rows"] == GROUPS * COPIES
    assert second["counts"]["joined_existing"] == GROUPS * COPIES
    assert (root / "out2" / "_SUCCESS").exists()


def small_warc(path: Path, pages: int) -> Path:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    path.parent.mkdir(parents=True)
    with open(path, "wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for i in range(pages):
            body = f"<html><body><p>Page {i} about bridges and rivers.</p></body></html>"
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            writer.write_record(
                writer.create_warc_record(
                    f"http://example.com/{i}",
                    "response",
                    payload=io.BytesIO(body.encode()),
                    http_headers=http,
                )
            )
    return path


def test_ingest_with_odd_names(spark, tmp_path):
    """WARC files under a directory holding all the odd characters, given as a plain path and
    as a ``file:`` URI; OUTPUT holds them too."""
    root = tmp_path / ALL_ODD
    first = small_warc(root / f"crawl {ALL_ODD}" / "a.warc.gz", 3)
    second = small_warc(root / f"second {ALL_ODD}" / "b.warc.gz", 2)
    out = root / f"corpus {ALL_ODD}"
    report = ingest(spark, [str(first.parent), uri(second)], uri(out))
    assert (out / "_SUCCESS").exists()
    rows = ds.dataset(str(out), format="parquet").to_table()
    assert rows.num_rows == 5, report
