"""``neardup report OUTPUT``: writes OUTPUT/report.html, prints its path, maps errors."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from neardup_spark.cli import main
from neardup_spark.config import build_config
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.report.html import REPORT_HTML


@pytest.fixture(scope="module")
def finished_run(spark, tmp_path_factory):
    table, _ = generate_corpus(300, seed=7, mean_words=100)
    root = tmp_path_factory.mktemp("cli_report")
    pq.write_table(table, root / "corpus.parquet")
    out = root / "out"
    run(spark, str(root / "corpus.parquet"), str(out), build_config())
    return out


def test_cli_prints_the_path_and_maps_errors(finished_run, tmp_path, capsys):
    out = finished_run
    assert main(["report", str(out), "--top", "3", "--max-members", "5"]) == 0
    assert capsys.readouterr().out.strip() == str(out / REPORT_HTML)
    page = (out / REPORT_HTML).read_text(encoding="utf-8")
    assert 0 < page.count("<h3>Cluster ") <= 3  # --top
    tables = page.split("<h3>Cluster ")[1:]
    assert all(0 < t.count("<td class='id'>") <= 5 for t in tables)  # --max-members
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "report.json" in capsys.readouterr().err
