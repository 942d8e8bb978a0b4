"""The labelled sets: readers, per-label scores and the confusion counts, on synthetic files
shaped like the real ones (and on the real ones when present)."""

from __future__ import annotations

import json

import pytest

from neardup_spark.errors import UserError
from neardup_spark.quality.labelled import (
    LABELLED_ENV,
    default_labelled_dir,
    evaluate_labelled,
    read_clough_stevenson,
    read_copycat,
    text_pair_jaccard,
)
from tests.quality.evaluation_scenario import (
    BASE,
    brute_jaccard,
    shingle_set,
    synthetic_labelled_dir,
)


def test_labelled_synthetic(tmp_path):
    root = synthetic_labelled_dir(tmp_path)
    result = evaluate_labelled(root, threshold=0.8)
    assert result["available"]
    copycat = result["sets"]["copycat_judgments"]
    assert (copycat["tp"], copycat["fp"], copycat["fn"], copycat["tn"]) == (1, 1, 1, 2)
    assert copycat["precision"] == 0.5 and copycat["recall"] == 0.5
    assert copycat["ignored"] == {"unknown": 1, "0.5s": 1}
    by_label = {r["label"]: r for r in copycat["labels"]}
    assert [r["label"] for r in copycat["labels"]] == ["3", "2", "1", "0.5"]
    assert by_label["1"]["pairs"] == 0 and by_label["1"]["mean_jaccard"] is None
    assert by_label["3"]["mean_jaccard"] == pytest.approx(0.5)
    assert by_label["2"]["role"] == "intermediate"
    light_j = brute_jaccard(shingle_set(BASE), shingle_set(BASE.replace("archive", "store")))
    assert by_label["2"]["mean_jaccard"] == pytest.approx(light_j)

    clough = result["sets"]["clough_stevenson"]
    cut_j = brute_jaccard(shingle_set(BASE), shingle_set(BASE + "\nand more"))
    by_label = {r["label"]: r for r in clough["labels"]}
    assert by_label["cut"]["mean_jaccard"] == pytest.approx(cut_j)
    assert by_label["light"]["mean_jaccard"] == pytest.approx(light_j)
    assert by_label["non"]["mean_jaccard"] == 0.0
    assert clough["tp"] == (cut_j >= 0.8) + (light_j >= 0.8)
    assert clough["fp"] == 0 and clough["precision"] in (1.0, None)
    assert clough["recall"] == pytest.approx(clough["tp"] / 2)


def test_labelled_absent_is_skipped_with_a_note(tmp_path):
    result = evaluate_labelled(tmp_path / "nowhere")
    assert not result["available"] and "not found" in result["note"]
    (tmp_path / "partial" / "clough_stevenson").mkdir(parents=True)
    partial = evaluate_labelled(tmp_path / "partial")
    assert not partial["available"]
    assert not partial["sets"]["copycat_judgments"]["available"]
    assert "docs.csv" in partial["sets"]["clough_stevenson"]["note"]


def test_labelled_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(LABELLED_ENV, str(tmp_path / "x"))
    assert default_labelled_dir() == tmp_path / "x"
    monkeypatch.delenv(LABELLED_ENV)
    assert default_labelled_dir().parts[-3:] == ("shared", "data", "labelled")


def test_text_pair_jaccard_matches_brute_force(scenario):
    texts = scenario.corpus.texts
    first, second = texts[:-1], texts[1:]
    got = text_pair_jaccard(first, second)
    want = [
        brute_jaccard(shingle_set(a), shingle_set(b)) for a, b in zip(first, second, strict=True)
    ]
    assert got.tolist() == want


@pytest.mark.skipif(
    not default_labelled_dir().is_dir(),
    reason=f"needs the labelled pairs at {default_labelled_dir()} (../shared/data/labelled "
    f"beside the clone, or ${LABELLED_ENV}; CI has them there): not run",
)
def test_labelled_real_data_when_present():
    root = default_labelled_dir()
    result = evaluate_labelled(root, threshold=0.8)
    copycat = result["sets"]["copycat_judgments"]
    counts = {r["label"]: r["pairs"] for r in copycat["labels"]}
    assert counts["3"] >= 50 and counts["0.5"] >= 100
    means = {r["label"]: r["mean_jaccard"] for r in copycat["labels"]}
    assert means["3"] > means["2"] > means["0.5"]
    clough = result["sets"]["clough_stevenson"]
    assert sum(r["pairs"] for r in clough["labels"]) == 95
    for s in (copycat, clough):
        assert 0.0 <= s["precision"] <= 1.0 and 0.0 <= s["recall"] <= 1.0


def test_readers_return_one_label_per_text_pair(tmp_path):
    root = synthetic_labelled_dir(tmp_path)
    copycat = read_copycat(root / "copycat_judgments")
    assert copycat.labels == ["3", "3", "0.5", "0.5", "0.5", "2"]
    assert len(copycat.first) == len(copycat.second) == 6
    assert copycat.first[0] == copycat.second[0] == BASE
    clough = read_clough_stevenson(root / "clough_stevenson")
    assert clough.labels == ["cut", "light", "heavy", "non"]
    assert set(clough.second) == {BASE} and clough.notes == []


def test_a_broken_jsonl_line_is_a_user_error_naming_it(tmp_path):
    root = synthetic_labelled_dir(tmp_path)
    with open(root / "copycat_judgments" / "pairs.jsonl", "a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    with pytest.raises(UserError, match="line 9"):
        evaluate_labelled(root)


@pytest.mark.parametrize(("threshold", "ngram"), [(0.0, 5), (1.5, 5), (0.8, 0)])
def test_bad_threshold_or_ngram_is_a_user_error(tmp_path, threshold, ngram):
    with pytest.raises(UserError):
        evaluate_labelled(tmp_path, threshold=threshold, ngram=ngram)


def test_the_result_is_plain_json(tmp_path):
    json.dumps(evaluate_labelled(synthetic_labelled_dir(tmp_path)))
