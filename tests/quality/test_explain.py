"""Explaining one pair: the seed article's numbers, planted pairs, ids of either type, errors."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.kernels.lsh import candidate_probability
from neardup_spark.quality.explain import explain, format_explanation, read_pair
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.quality.worked_examples import D1, D2

OTHER = (
    "an unrelated sentence about rivers and mountains that shares nothing with the crawler "
    "text at all, written only to be different"
)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain_small")
    table = pa.table(
        {
            "id": ["d1", "d2", "d1-copy", "other", "empty"],
            "text": [
                D1,
                D2,
                "THE crawler, fetches each page and follows its links to new pages!",
                OTHER,
                "",
            ],
        }
    )
    pq.write_table(table, root / "part-0.parquet")
    return str(root)


@pytest.fixture(scope="module")
def integer_ids(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain_int")
    table = pa.table({"doc": pa.array([7, 8, 9], pa.int64()), "body": [D1, D2, D1]})
    pq.write_table(table, root / "data.parquet")
    return str(root / "data.parquet")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    corpus, truth = generate_corpus(400, seed=5, mean_words=200)
    root = tmp_path_factory.mktemp("explain_generated")
    (root / "corpus").mkdir()
    pq.write_table(corpus, root / "corpus" / "part-00000.parquet")
    return str(root), truth


def test_identical_documents_have_jaccard_one_and_are_exact_copies(small):
    result = explain(small, "d1", "d1-copy", build_config(options={"ngram": 3}))
    assert result["jaccard"] == 1.0
    assert result["containment_a_in_b"] == result["containment_b_in_a"] == 1.0
    assert result["minhash"]["estimate"] == 1.0
    assert result["minhash"]["matched_bands"] == list(range(result["minhash"]["bands"]))
    assert result["simhash"]["hamming"] == 0
    assert result["exact_copy"] and result["paired"]
    assert result["verdict"] == "exact copy"
    # Without the exact stage, the MinHash path pairs them.
    no_exact = explain(small, "d1", "d1-copy", build_config(overrides=["exact_first=false"]))
    assert no_exact["verdict"] == "candidate and verified" and no_exact["paired"]


def test_seed_pair_at_ngram_3_has_jaccard_one_third(small):
    config = build_config(options={"ngram": 3})
    result = explain(small, "d1", "d2", config)
    assert result["jaccard"] == pytest.approx(1 / 3, abs=1e-15)
    assert (result["shingles"]["shared"], result["shingles"]["union"]) == (5, 15)
    assert [d["shingles"] for d in result["documents"]] == [10, 10]
    assert [d["words"] for d in result["documents"]] == [12, 12]
    assert result["containment_a_in_b"] == result["containment_b_in_a"] == 0.5
    assert set(result["shingles"]["examples"]) <= {
        "the crawler fetches",
        "page and follows",
        "and follows its",
        "follows its links",
        "its links to",
    }
    assert len(result["shingles"]["examples"]) == 5
    assert isinstance(result["simhash"]["hamming"], int)
    assert result["minhash"]["candidate_probability"] == pytest.approx(
        float(candidate_probability(1 / 3, config.banding.bands, config.banding.rows))
    )
    assert not result["exact_copy"] and not result["verified"]
    assert result["verdict"] in ("not a candidate", "candidate, not verified")
    assert result["verdict"] == (
        "candidate, not verified" if result["candidate"] else "not a candidate"
    )
    text = format_explanation(result)
    assert "0.3333" in text and "verdict" in text and "NOT pair" in text


def test_a_planted_near_duplicate_is_candidate_and_verified(generated):
    root, truth = generated
    rows = [
        r
        for r in truth.to_pylist()
        if r["kind"] not in ("exact", "case_punct") and 0.9 <= r["jaccard"] < 1.0
    ]
    assert rows
    pair = max(rows, key=lambda r: r["jaccard"])
    result = explain(root, pair["doc_a"], pair["doc_b"], build_config())
    assert result["jaccard"] == pytest.approx(pair["jaccard"], abs=1e-9)
    assert result["minhash"]["matched_bands"]
    assert abs(result["minhash"]["estimate"] - result["jaccard"]) < 0.15
    assert result["verdict"] == "candidate and verified" and result["paired"]
    assert "PAIR them" in format_explanation(result)


def test_a_planted_distant_pair_is_not_paired(generated):
    root, truth = generated
    low = min(truth.to_pylist(), key=lambda r: r["jaccard"])
    assert low["jaccard"] < 0.8
    result = explain(root, low["doc_a"], low["doc_b"], build_config())
    assert not result["verified"] and not result["paired"]


def test_missing_id_is_a_user_error_naming_it(small):
    with pytest.raises(UserError, match="'nope'"):
        explain(small, "d1", "nope", build_config())
    with pytest.raises(UserError, match="'x' and 'y'"):
        explain(small, "x", "y", build_config())


def test_integer_ids_are_cast_from_strings(integer_ids):
    config = build_config(options={"id_col": "doc", "text_col": "body", "ngram": 3})
    a, b, text_a, text_b = read_pair(integer_ids, "7", "8", "doc", "body")
    assert (a, b, text_a, text_b) == (7, 8, D1, D2)
    assert explain(integer_ids, "7", "9", config)["jaccard"] == 1.0
    assert explain(integer_ids, 7, 8, config)["jaccard"] == pytest.approx(1 / 3)
    with pytest.raises(UserError, match="not an integer"):
        explain(integer_ids, "7", "seven", config)
    with pytest.raises(UserError, match="10"):
        explain(integer_ids, "7", "10", config)


def test_missing_column_and_input_are_user_errors(small, tmp_path):
    with pytest.raises(UserError, match="id column 'key'"):
        explain(small, "d1", "d2", build_config(options={"id_col": "key"}))
    with pytest.raises(UserError, match="not found"):
        explain(str(tmp_path / "none"), "d1", "d2", build_config())


def test_empty_document_matches_no_band(small):
    result = explain(small, "empty", "d1", build_config())
    assert result["documents"][0]["shingles"] == 0
    assert result["minhash"]["matched_bands"] == [] and result["jaccard"] == 0.0
    assert result["verdict"] == "not a candidate"


def test_simhash_method_uses_the_hamming_limit(small):
    result = explain(small, "d1", "d1-copy", build_config(options={"method": "simhash"}))
    assert result["verdict"] == "exact copy"
    config = build_config(options={"method": "simhash"}, overrides=["exact_first=false"])
    result = explain(small, "d1", "d1-copy", config)
    assert result["simhash"]["shared_tables"] and result["verdict"] == "candidate and verified"
    far = explain(small, "d1", "other", config)
    assert far["simhash"]["hamming"] > 3 and not far["paired"]


def test_a_null_text_is_shown_as_such(tmp_path):
    pq.write_table(pa.table({"id": ["a", "b"], "text": [None, D1]}), tmp_path / "p.parquet")
    result = explain(str(tmp_path), "a", "b", build_config())
    assert result["documents"][0]["text_is_null"] and result["documents"][0]["chars"] is None
    assert result["documents"][0]["exact_fingerprint"] is None
    assert result["verdict"] == "not a candidate" and not result["paired"]
    assert "A         null text" in format_explanation(result)


def test_exact_method_pairs_only_identical_texts(small):
    config = build_config(options={"method": "exact"})
    assert explain(small, "d1", "d1-copy", config)["verdict"] == "exact copy"
    other = explain(small, "d1", "d2", config)
    assert other["verdict"] == "not exact copies" and not other["candidate"]


@pytest.mark.parametrize("fmt", ["json", "csv", "orc"])
def test_a_corpus_in_another_input_format_gives_the_same_pair(tmp_path, fmt):
    """``neardup dedupe`` reads JSON lines, CSV and ORC too: so does explain, the format told by
    the files' names (a directory: its first data file's), compressed by suffix; a CSV text
    holding quotes and line breaks comes back whole."""
    texts = [D1, 'a "quoted" line,\nthen a second line', D2]
    table = pa.table({"id": ["a", "b", "c"], "text": texts})
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    if fmt == "json":
        import gzip
        import json

        with gzip.open(corpus / "part-0.jsonl.gz", "wt") as out:
            out.writelines(json.dumps(row) + "\n" for row in table.to_pylist())
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, corpus / "part-0.csv")
    else:
        import pyarrow.orc as orc

        orc.write_table(table, corpus / "part-0.orc")
    (corpus / "_SUCCESS").write_text("")
    assert read_pair(str(corpus), "b", "a") == ("b", "a", texts[1], D1)
    # A glob, as dedupe takes one: its files' format and rows.
    assert read_pair(str(corpus / "part-*"), "b", "a") == ("b", "a", texts[1], D1)
    result = explain(str(corpus), "a", "c", build_config(options={"ngram": 3}))
    assert result["jaccard"] == pytest.approx(1 / 3)


def test_a_corpus_not_in_its_names_format_is_a_user_error_naming_it(tmp_path):
    (tmp_path / "part-0.jsonl").write_text("this is not json\n")
    with pytest.raises(UserError, match=r"cannot read .* as JSON lines"):
        read_pair(str(tmp_path), "a", "b")
