"""A run over a corpus whose file names do not say its format (``--input-format json``): the
tools that read the corpus again without Spark (``evaluate --corpus``, report.html's texts,
``explain --input-format``) read it as the run did."""

from __future__ import annotations

import json

import pyarrow.dataset as ds

from neardup_spark.config import build_config
from neardup_spark.io.corpus import CorpusSource
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.evaluate import evaluate
from neardup_spark.quality.explain import explain
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.report.data import report_data


def test_the_tools_read_the_corpus_in_the_format_the_run_was_told(spark, tmp_path):
    table, _ = generate_corpus(120, seed=8, mean_words=60)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rows = table.to_pylist()
    (corpus / "part-00000").write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out"
    config = build_config()
    report = run(spark, CorpusSource(str(corpus), format="json"), str(out), config)
    assert report["input_format"] == "json"
    assert json.loads((out / "report.json").read_text())["input_format"] == "json"

    oracle = evaluate(str(out), corpus=str(corpus))["oracle"]
    assert oracle["docs"] == 120 and oracle["recall"] == 1.0

    data = report_data(str(out))
    assert data["corpus"]["available"], data["corpus"]
    texts = {row["id"]: row["text"] for row in rows}
    pairs = ds.dataset(str(out / "pairs")).to_table().to_pylist()
    a, b = pairs[0]["doc_a"], pairs[0]["doc_b"]
    result = explain(str(corpus), a, b, config, input_format="json")
    assert result["jaccard"] == pairs[0]["jaccard"] and texts[a] and texts[b]
