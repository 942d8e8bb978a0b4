"""The printed evaluation: every section present, numbers formatted as the tables promise."""

from __future__ import annotations

import json

from neardup_spark.quality.evaluate import evaluate
from neardup_spark.quality.evaluation_tables import format_labelled, format_table
from neardup_spark.quality.labelled import evaluate_labelled
from tests.quality.evaluation_scenario import synthetic_labelled_dir

EMPTY_SUMMARY = {
    "docs": 0,
    "clusters": 0,
    "duplicate_clusters": 0,
    "docs_in_duplicate_clusters": 0,
    "pairs": 0,
}


def test_format_table_shows_every_section(scenario, tmp_path):
    labelled = synthetic_labelled_dir(tmp_path)
    result = evaluate(
        str(scenario.output),
        truth=str(scenario.truth_path),
        corpus=str(scenario.corpus_path),
        labelled_dir=str(labelled),
    )
    text = format_table(result)
    for needle in (
        "pair precision",
        "pair recall",
        "cluster ARI",
        "substitute_3",
        "0.9-1.0",
        "Exact all-pairs oracle",
        "edge recall",
        "Labelled sets",
        "copycat_judgments",
        "clough_stevenson",
    ):
        assert needle in text, needle
    json.dumps(result)  # the result is plain JSON


def test_labelled_absent_is_shown_as_a_note(tmp_path):
    result = evaluate_labelled(tmp_path / "nowhere")
    assert "not found" in format_table(
        {
            "output": "x",
            "threshold": 0.8,
            "threshold_source": "argument",
            "summary": EMPTY_SUMMARY,
            "labelled": result,
        }
    )


def test_summary_heading_counts_and_contract_warnings():
    summary = {**EMPTY_SUMMARY, "docs": 1234, "clusters": 1000, "pairs": 7}
    result = {
        "output": "out/x",
        "threshold": 0.75,
        "threshold_source": "argument",
        "summary": summary,
        "checks": {"duplicate_doc_ids": 0, "pairs_unknown_ids": 1500},
    }
    text = format_table(result)
    assert text.startswith("## Evaluation of out/x (threshold 0.75 from argument)\n")
    assert "|     1,234 |    1,000 |" in text
    assert "**Output contract warnings:** pairs_unknown_ids = 1,500" in text
    assert "duplicate_doc_ids" not in text
    assert "planted truth" not in text and "oracle" not in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_truth_rows_show_fractions_and_missing_values_as_dashes(scenario):
    result = evaluate(str(scenario.output), truth=str(scenario.truth_path))
    truth = result["truth"]
    text = format_table(result)
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if "|" in line}
    fraction = f"{truth['reported_correct']}/{truth['reported_pairs']}"
    assert f"| {truth['precision']:.4f} ({fraction})" in lines["pair precision"]
    assert f"| {truth['f1']:.4f}" in lines["F1"]
    heavy = next(line for line in text.splitlines() if line.startswith("| heavy "))
    assert heavy.rstrip().endswith("|        - |")  # recall@t of a kind with no positive


def test_format_labelled_lists_scores_and_notes(tmp_path):
    labelled = evaluate_labelled(synthetic_labelled_dir(tmp_path), threshold=0.8)
    text = format_labelled(labelled)
    assert text.startswith("### Labelled sets (exact Jaccard of word 5-shingles >= 0.8)")
    assert "| copycat_judgments |  1 |  1 |  1 |  2 |    0.5000 |" in text
    assert "copycat_judgments: ignored labels '0.5s' x1, 'unknown' x1" in text
