"""The evaluation against planted truth and the exact oracle, checked against pure-Python
brute force on the scenario of ``evaluation_scenario`` (no Spark)."""

from __future__ import annotations

import itertools
import json

import pyarrow as pa
import pytest

from neardup_spark.errors import UserError
from neardup_spark.quality.evaluate import evaluate
from tests.quality.evaluation_scenario import (
    THRESHOLD,
    Scenario,
    expected_truth_metrics,
    scenario_jaccard,
    synthetic_labelled_dir,
    write_parquet_dir,
)

# ------------------------------------------------------------------------------------------
# Truth metrics


def test_scenario_plants_what_the_tests_need(scenario):
    kinds = {kind for _, _, kind in scenario.corpus.truth}
    assert {"exact", "case_punct", "substitute_1", "substitute_3", "truncate", "heavy"} <= kinds
    sims = [scenario_jaccard(scenario, s, c) for s, c, _ in scenario.corpus.truth]
    assert min(sims) < 0.5 < max(sims) == 1.0
    assert any(THRESHOLD > s >= 0.5 for s in sims)
    assert 50 <= len(scenario.corpus.texts) <= 70


@pytest.mark.parametrize("fixture", ["scenario", "int_scenario"])
def test_truth_metrics_match_brute_force(fixture, request):
    sc: Scenario = request.getfixturevalue(fixture)
    result = evaluate(str(sc.output), truth=str(sc.truth_path))
    want = expected_truth_metrics(sc, THRESHOLD, with_corpus=False)
    truth = result["truth"]
    assert result["threshold"] == THRESHOLD and result["threshold_source"] == "report.json"
    assert truth["positives"] == want["positives"]
    assert truth["positives_found"] == want["found"]
    assert truth["recall"] == pytest.approx(want["recall"])
    assert truth["precision"] == pytest.approx(want["precision"])
    assert truth["f1"] == pytest.approx(want["f1"])
    assert truth["ari"] == pytest.approx(want["ari"])
    assert truth["precision_basis"] == {
        "jaccard_column": len(sc.pairs) - 2,
        "corpus": 0,
        "truth_lookup": 2,
    }
    assert "lower bound" in truth["precision_definition"]
    got_kind = {r["kind"]: [r["pairs"], r["found"]] for r in truth["by_kind"]}
    assert got_kind == want["by_kind"]
    assert [(r["pairs"], r["found"]) for r in truth["by_band"]] == want["by_band"]
    assert [r["band"] for r in truth["by_band"]][1:] == [
        "0.5-0.6",
        "0.6-0.7",
        "0.7-0.8",
        "0.8-0.9",
        "0.9-1.0",
    ]
    # The deliberate mistakes are visible.
    assert truth["recall"] < 1.0 or truth["precision"] < 1.0
    assert result["checks"]["pairs_across_clusters"] == 0
    assert result["checks"]["representative_flag_wrong"] == 0
    assert result["checks"]["duplicate_doc_ids"] == 0


def test_threshold_argument_overrides_the_run(scenario):
    result = evaluate(str(scenario.output), truth=str(scenario.truth_path), threshold=0.6)
    want = expected_truth_metrics(scenario, 0.6, with_corpus=False)
    assert result["threshold"] == 0.6 and result["threshold_source"] == "argument"
    assert result["truth"]["positives"] == want["positives"]
    assert result["truth"]["recall"] == pytest.approx(want["recall"])
    assert result["truth"]["precision"] == pytest.approx(want["precision"])
    assert result["truth"]["ari"] == pytest.approx(want["ari"])


def test_generated_dir_stands_for_its_truth_and_corpus(scenario):
    gen = scenario.truth_path.parent
    result = evaluate(str(scenario.output), truth=str(gen), corpus=str(gen))
    assert result["truth"]["truth"].endswith("truth")
    assert result["oracle"]["corpus"].endswith("corpus")


# ------------------------------------------------------------------------------------------
# The oracle


@pytest.mark.parametrize("fixture", ["scenario", "int_scenario"])
def test_oracle_matches_brute_force(fixture, request):
    sc: Scenario = request.getfixturevalue(fixture)
    result = evaluate(str(sc.output), truth=str(sc.truth_path), corpus=str(sc.corpus_path))
    oracle = result["oracle"]
    positives = [p for p, j in sc.exact.items() if j >= THRESHOLD]
    found = [p for p in positives if sc.labels[p[0]] == sc.labels[p[1]]]
    listed = {frozenset((a, b)) for a, b, _, _ in sc.pairs}
    correct = sum(scenario_jaccard(sc, a, b) >= THRESHOLD for a, b, _, _ in sc.pairs)
    co_clustered = sum(
        sc.labels[i] == sc.labels[j] for i, j in itertools.combinations(range(len(sc.labels)), 2)
    )
    assert oracle["docs"] == len(sc.corpus.texts)
    assert oracle["positives"] == len(positives)
    assert oracle["found"] == len(found)
    assert oracle["missed"] == len(positives) - len(found)
    assert oracle["recall"] == pytest.approx(len(found) / len(positives))
    assert oracle["listed_in_pairs"] == sum(frozenset(p) in listed for p in positives)
    assert oracle["reported_correct"] == correct
    assert oracle["precision"] == pytest.approx(correct / len(sc.pairs))
    assert oracle["co_clustered_pairs"] == co_clustered
    assert oracle["cluster_pair_precision"] == pytest.approx(len(found) / co_clustered)
    assert oracle["jaccard_checked"] == len(sc.pairs) - 2
    assert oracle["jaccard_mismatches"] == 0
    bands = {r["band"]: r for r in oracle["by_band"]}
    assert set(bands) == {"0.8-0.9", "0.9-1.0"}
    assert sum(r["positives"] for r in bands.values()) == len(positives)
    assert sum(r["missed"] for r in bands.values()) == oracle["missed"]
    # With the corpus, null-Jaccard rows are measured rather than looked up in the truth.
    want = expected_truth_metrics(sc, THRESHOLD, with_corpus=True)
    assert result["truth"]["precision"] == pytest.approx(want["precision"])
    assert result["truth"]["precision_basis"]["corpus"] == 2
    assert result["truth"]["truth_jaccard_check"]["disagreements"] == 0


def test_the_oracle_reads_a_corpus_in_another_input_format(scenario, tmp_path):
    """The corpus as JSON lines (``neardup dedupe`` reads it as well): the oracle's figures are
    those of the Parquet corpus (it refused it with "cannot read corpus ... as Parquet")."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(scenario.corpus_path)).to_table()
    as_json = tmp_path / "corpus.jsonl"
    as_json.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))

    def figures(corpus: str) -> dict:
        oracle = evaluate(str(scenario.output), corpus=corpus)["oracle"]
        return {k: v for k, v in oracle.items() if k not in ("corpus", "seconds")}

    parquet = figures(str(scenario.corpus_path))
    assert parquet["docs"] == len(scenario.corpus.texts) and parquet["positives"] > 0
    assert figures(str(as_json)) == parquet


def test_oracle_switches_to_the_prefix_filter_on_heavy_work(scenario, monkeypatch):
    plain = evaluate(str(scenario.output), corpus=str(scenario.corpus_path))["oracle"]
    assert plain["strategy"] == "product" and plain["product_work"] > 0
    monkeypatch.setattr("neardup_spark.quality.oracle.PREFIX_FILTER_WORK", 0)
    prefixed = evaluate(str(scenario.output), corpus=str(scenario.corpus_path))["oracle"]
    assert prefixed["strategy"] == "prefix"
    for key in ("positives", "found", "listed_in_pairs", "reported_correct", "by_band"):
        assert prefixed[key] == plain[key], key


def test_oracle_refuses_a_large_corpus(scenario):
    with pytest.raises(UserError, match="limited to"):
        evaluate(str(scenario.output), corpus=str(scenario.corpus_path), oracle_max_docs=10)


def test_oracle_refuses_a_foreign_corpus(scenario, tmp_path):
    other = tmp_path / "other"
    write_parquet_dir(other, pa.table({"id": ["x", "y"], "text": ["a b c", "d e f"]}))
    with pytest.raises(UserError, match="does not belong"):
        evaluate(str(scenario.output), corpus=str(other))


def test_oracle_reports_a_missing_text_column(scenario, tmp_path):
    other = tmp_path / "other"
    write_parquet_dir(other, pa.table({"id": ["x"], "body": ["a"]}))
    with pytest.raises(UserError, match="lacks column"):
        evaluate(str(scenario.output), corpus=str(other))


# ------------------------------------------------------------------------------------------
# Errors, summary, labelled


def test_missing_report_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"report\.json not found"):
        evaluate(str(tmp_path))


def test_missing_threshold_is_a_user_error(scenario, tmp_path):
    out = tmp_path / "out"
    for name in ("clusters", "pairs"):
        src = scenario.output / name
        (out / name).mkdir(parents=True)
        (out / name / "part-00000.parquet").write_bytes((src / "part-00000.parquet").read_bytes())
    (out / "report.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(UserError, match="threshold"):
        evaluate(str(out))
    assert evaluate(str(out), threshold=0.9)["summary"]["docs"] == len(scenario.ids)


def test_truth_of_another_corpus_is_a_user_error(scenario, tmp_path):
    truth = tmp_path / "truth"
    write_parquet_dir(
        truth,
        pa.table({"doc_a": ["zz-1"], "doc_b": ["zz-2"], "kind": ["exact"], "jaccard": [1.0]}),
    )
    with pytest.raises(UserError, match="does not belong"):
        evaluate(str(scenario.output), truth=str(truth))


def test_summary_without_truth_or_corpus(scenario):
    result = evaluate(str(scenario.output))
    summary = result["summary"]
    assert result["truth"] is None and result["oracle"] is None
    assert summary["docs"] == len(scenario.ids)
    assert summary["clusters"] == len(set(scenario.labels))
    assert summary["pairs"] == len(scenario.pairs)
    assert summary["pairs_by_method"] == {"minhash": len(scenario.pairs) - 2, "simhash": 2}


@pytest.mark.parametrize("threshold", [0.0, 1.5])
def test_threshold_out_of_range_is_a_user_error(scenario, threshold):
    with pytest.raises(UserError, match="threshold must be in"):
        evaluate(str(scenario.output), threshold=threshold)


def test_labelled_sets_are_scored_at_the_run_threshold(scenario, tmp_path):
    result = evaluate(str(scenario.output), labelled_dir=str(synthetic_labelled_dir(tmp_path)))
    assert result["labelled"]["threshold"] == THRESHOLD and result["labelled"]["ngram"] == 5
    assert result["labelled"]["sets"]["copycat_judgments"]["tp"] == 1
    assert "labelled" not in evaluate(str(scenario.output))
    json.dumps(result)
