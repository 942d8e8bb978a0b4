"""The synthetic corpus generator: shape, determinism, planted pairs, truth Jaccard (no Spark)."""

from __future__ import annotations

import doctest
import hashlib
import json
import re
from collections import Counter, defaultdict
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.ownership import OWNERSHIP_FILE
from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.quality import generate, spill
from neardup_spark.quality.edits import EDITS, KINDS
from neardup_spark.quality.generate import (
    CORPUS_SCHEMA,
    TRUTH_SCHEMA,
    generate_corpus,
    generated_part,
    id_width,
    write_corpus,
)
from neardup_spark.quality.language import (
    BOILERPLATE_FOOTERS,
    BOILERPLATE_HEADERS,
    VOCAB_SIZE,
    language,
)

N_DOCS = 2000
MEAN_WORDS = 150
ID_PATTERN = re.compile(r"doc-\d{7}")


@pytest.fixture(scope="module")
def generated() -> tuple[pa.Table, pa.Table]:
    return generate_corpus(N_DOCS, seed=7, mean_words=MEAN_WORDS)


@pytest.fixture(scope="module")
def texts(generated) -> dict[str, str]:
    corpus, _ = generated
    return dict(zip(corpus["id"].to_pylist(), corpus["text"].to_pylist(), strict=True))


@pytest.fixture(scope="module")
def pairs(generated) -> list[dict]:
    return generated[1].to_pylist()


def brute_force_jaccard(a: str, b: str, k: int = 5) -> float:
    """Jaccard of word k-shingle sets, shingles as tuples of words (no hashing)."""

    def shingles(text: str) -> set[tuple[str, ...]]:
        words = normalize_text(text).split()
        if len(words) < k:
            return {tuple(words)} if words else set()
        return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}

    sa, sb = shingles(a), shingles(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def punctuation(text: str) -> str:
    return re.sub(r"[^.,!?;:\n]", "", text)


def corpus_digest(corpus: pa.Table, truth: pa.Table) -> str:
    """SHA-256 of every id and text, and every truth row (Jaccard as an exact hex float)."""
    h = hashlib.sha256()
    for doc_id, text in zip(corpus["id"].to_pylist(), corpus["text"].to_pylist(), strict=True):
        h.update(json.dumps([doc_id, text]).encode() + b"\n")
    for r in truth.to_pylist():
        row = [r["doc_a"], r["doc_b"], r["kind"], r["jaccard"].hex()]
        h.update(json.dumps(row).encode() + b"\n")
    return h.hexdigest()


# Digests of the skeleton commit's generator (e5ece5d, before generate.py was split into
# language, documents, edits and generate): a seed's corpus must never change, bit for bit.
# (8000, 11, 30) spans two batches of originals (BATCH_DOCS = 5000). The streamed generator
# (plan replayed batch by batch, texts spilled) keeps them; `neardup generate DIR --docs 100000
# --seed 1` and `--docs 1000000` wrote byte-identical Parquet files before and after it.
DIGESTS = {
    (8000, 11, 30): "0cc9e4e35b6055a7e823f21c256824f01bc118ca853f2072004ce9eac1ebf519",
    (2000, 7, 150): "35222a5aad03950d8d28480847f0136a2695c17e5277ef1bfb147e5974bd8bf0",
    (20, 1, 30): "07bb5d091927b6f145e0a54299f0b4bc982b2d2f448d23218457f328eb2bd5f8",
}


@pytest.mark.parametrize(("n_docs", "seed", "mean_words"), list(DIGESTS))
def test_a_seed_gives_the_same_corpus_bit_for_bit(n_docs, seed, mean_words):
    corpus, truth = generate_corpus(n_docs, seed=seed, mean_words=mean_words)
    assert corpus_digest(corpus, truth) == DIGESTS[(n_docs, seed, mean_words)]


def test_the_docstring_example_holds():
    results = doctest.testmod(generate)
    assert results.attempted > 0 and results.failed == 0


def test_same_seed_same_tables_other_seed_other_tables():
    corpus1, truth1 = generate_corpus(300, seed=3, mean_words=80)
    corpus2, truth2 = generate_corpus(300, seed=3, mean_words=80)
    assert corpus1.equals(corpus2)
    assert truth1.equals(truth2)
    assert corpus1["text"].to_pylist() == corpus2["text"].to_pylist()
    assert truth1["jaccard"].to_pylist() == truth2["jaccard"].to_pylist()

    corpus3, truth3 = generate_corpus(300, seed=4, mean_words=80)
    assert corpus3["id"].equals(corpus1["id"])
    assert corpus3["text"].to_pylist() != corpus1["text"].to_pylist()
    assert not truth3.equals(truth1)


def test_schema_and_sizes(generated):
    corpus, truth = generated
    assert corpus.schema == CORPUS_SCHEMA
    assert truth.schema == TRUTH_SCHEMA
    assert corpus.schema.field("id").type == pa.string()
    assert corpus.schema.field("text").type == pa.string()
    assert truth.schema.field("jaccard").type == pa.float64()
    assert corpus.num_rows == N_DOCS
    assert truth.num_rows == round(0.3 * N_DOCS)
    assert corpus["id"].null_count == corpus["text"].null_count == 0
    assert truth["jaccard"].null_count == 0


def test_ids_unique_zero_padded_in_order(generated):
    ids = generated[0]["id"].to_pylist()
    assert len(set(ids)) == len(ids)
    assert all(ID_PATTERN.fullmatch(i) for i in ids)
    assert ids == sorted(ids)
    assert [int(i.removeprefix("doc-")) for i in ids] == list(range(N_DOCS))


@pytest.mark.parametrize(("n_docs", "width"), [(1, 7), (10_000_000, 7), (10_000_001, 8)])
def test_id_width_fits_string_order_to_numeric_order(n_docs, width):
    assert id_width(n_docs) == width


def test_truth_ids_exist_and_pairs_are_ordered(pairs, texts):
    assert len({(p["doc_a"], p["doc_b"]) for p in pairs}) == len(pairs)
    for p in pairs:
        assert p["doc_a"] in texts and p["doc_b"] in texts
        assert p["doc_a"] < p["doc_b"]
        assert p["kind"] in KINDS
        assert 0.0 <= p["jaccard"] <= 1.0


def test_all_kinds_planted_about_equally_often(pairs):
    counts = Counter(p["kind"] for p in pairs)
    assert set(counts) == set(KINDS)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert tuple(EDITS) == KINDS


def test_copies_derive_from_originals_only(pairs):
    """Each connected group of planted pairs is a star: one source, copies that appear once."""
    neighbours: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        neighbours[p["doc_a"]].add(p["doc_b"])
        neighbours[p["doc_b"]].add(p["doc_a"])
    for doc, linked in neighbours.items():
        if len(linked) > 1:  # a source: all its partners are copies, each of it alone
            assert all(neighbours[c] == {doc} for c in linked)


def test_identical_after_normalisation_kinds_have_jaccard_one(pairs, texts):
    for p in pairs:
        a, b = texts[p["doc_a"]], texts[p["doc_b"]]
        if p["kind"] == "exact":
            assert a == b
            assert p["jaccard"] == 1.0
        elif p["kind"] == "case_punct":
            assert a != b
            assert normalize_text(a) == normalize_text(b)
            assert p["jaccard"] == 1.0


def test_more_substitutions_lower_jaccard(pairs):
    by_kind: dict[str, list[float]] = defaultdict(list)
    for p in pairs:
        by_kind[p["kind"]].append(p["jaccard"])
    means = {kind: float(np.mean(values)) for kind, values in by_kind.items()}
    assert means["substitute_10"] < means["substitute_3"] < means["substitute_1"] < 1.0
    for kind in KINDS:
        if kind not in ("exact", "case_punct"):
            assert max(by_kind[kind]) < 1.0, kind


def test_truth_jaccard_matches_brute_force(pairs, texts):
    checked = Counter()
    for p in pairs:
        if checked[p["kind"]] == 3:
            continue
        checked[p["kind"]] += 1
        expected = brute_force_jaccard(texts[p["doc_a"]], texts[p["doc_b"]])
        assert p["jaccard"] == pytest.approx(expected, abs=1e-12), p
    assert set(checked) == set(KINDS)


def test_edits_look_as_described(pairs, texts):
    for p in pairs:
        a, b = texts[p["doc_a"]], texts[p["doc_b"]]
        if p["kind"] == "boilerplate":
            longer = a if len(a) > len(b) else b
            assert longer.startswith(BOILERPLATE_HEADERS)
            assert longer.endswith(BOILERPLATE_FOOTERS)
        elif p["kind"] == "reorder":
            paragraphs_a, paragraphs_b = a.split("\n\n"), b.split("\n\n")
            assert len(paragraphs_a) >= 3
            assert paragraphs_a != paragraphs_b
            assert sorted(normalize_text(x) for x in paragraphs_a) == sorted(
                normalize_text(x) for x in paragraphs_b
            )
        elif p["kind"] == "insert_delete" or p["kind"].startswith("substitute"):
            assert len(a.split()) == len(b.split())
            assert punctuation(a) == punctuation(b)  # sentences and paragraphs kept
            assert a != b
        elif p["kind"] == "truncate":
            shorter, longer = sorted((normalize_text(a), normalize_text(b)), key=len)
            assert longer.startswith(shorter)
            assert 0.80 <= len(shorter.split()) / len(longer.split()) <= 0.96


def test_text_looks_like_prose(generated, pairs):
    corpus, _ = generated
    docs = corpus["text"].to_pylist()
    planted = {p["doc_a"] for p in pairs} | {p["doc_b"] for p in pairs}
    unpaired = [t for i, t in zip(corpus["id"].to_pylist(), docs, strict=True) if i not in planted]
    lengths = np.array([len(d.split()) for d in docs])
    assert 0.8 * MEAN_WORDS < lengths.mean() < 1.3 * MEAN_WORDS
    assert lengths.max() <= 8 * MEAN_WORDS + 60  # the clip, plus boilerplate and a sentence
    assert 1 <= np.count_nonzero((lengths > 0) & (lengths < 5)) <= 10  # a few short documents
    assert docs.count("") == 1
    long_docs = [d for d in unpaired if len(d.split()) > 100]
    assert all(d == d.strip() and "  " not in d for d in docs)
    assert all("\n\n" in d for d in long_docs if len(d.split()) > 300)  # paragraphs
    for doc in long_docs[:20]:
        sentences = re.split(r"(?<=[.!?])\s+", doc)
        assert all(s[0].isupper() and s[-1] in ".!?" for s in sentences)
        assert all(6 <= len(s.split()) <= 25 for s in sentences)
    vocabulary = set(language().words)
    assert len(vocabulary) == VOCAB_SIZE
    words = normalize_text(long_docs[0]).split()
    assert {w for w in words if w in vocabulary} == set(words)


@pytest.mark.parametrize("n_docs", [0, 1, 2, 9, 40])
def test_tiny_corpora(n_docs):
    corpus, truth = generate_corpus(n_docs, seed=1, mean_words=3)
    assert corpus.num_rows == n_docs
    assert corpus.schema == CORPUS_SCHEMA and truth.schema == TRUTH_SCHEMA
    assert set(truth["doc_a"].to_pylist()) <= set(corpus["id"].to_pylist())


@pytest.mark.parametrize(
    ("args", "message"),
    [((-1, 0, 10), "documents"), ((10, -1, 10), "seed"), ((10, 0, 0), "length")],
)
def test_bad_arguments_are_user_errors(args, message):
    with pytest.raises(UserError, match=message):
        generate_corpus(*args)


def test_write_corpus_refuses_then_overwrites(tmp_path):
    summary = write_corpus(str(tmp_path), 120, seed=5, mean_words=40, rows_per_file=50)
    corpus_files = sorted(p.name for p in (tmp_path / "corpus").iterdir())
    assert corpus_files == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert [p.name for p in (tmp_path / "truth").iterdir()] == ["part-00000.parquet"]
    expected_corpus, expected_truth = generate_corpus(120, seed=5, mean_words=40)
    written = pa.concat_tables(pq.read_table(tmp_path / "corpus" / name) for name in corpus_files)
    assert written.equals(expected_corpus.combine_chunks())
    assert pq.read_table(tmp_path / "truth" / "part-00000.parquet").equals(expected_truth)
    assert summary["docs"] == 120
    assert summary["truth_pairs"] == expected_truth.num_rows == 36
    assert sum(summary["by_kind"].values()) == 36
    assert summary["files"] == 3

    with pytest.raises(UserError, match="overwrite"):
        write_corpus(str(tmp_path), 50, seed=5, mean_words=40)
    assert len(list((tmp_path / "corpus").iterdir())) == 3  # untouched

    write_corpus(str(tmp_path), 30, seed=6, mean_words=40, overwrite=True, rows_per_file=50)
    assert [p.name for p in (tmp_path / "corpus").iterdir()] == ["part-00000.parquet"]
    assert pq.read_table(tmp_path / "corpus").num_rows == 30
    assert pq.read_table(tmp_path / "truth").num_rows == 9


def test_write_corpus_refuses_a_leftover_truth_directory(tmp_path):
    (tmp_path / "truth").mkdir()
    with pytest.raises(UserError, match="truth"):
        write_corpus(str(tmp_path), 10, mean_words=20)
    assert not (tmp_path / "corpus").exists()


def test_write_corpus_reports_the_time_from_start_to_written(tmp_path, monkeypatch):
    """``seconds`` is the clock from before generating to after writing, to the millisecond."""
    clock = iter([100.0, 102.2504])  # a third reading would raise StopIteration
    monkeypatch.setattr(generate, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    summary = write_corpus(str(tmp_path), 30, seed=1, mean_words=20)
    assert summary["seconds"] == 2.25
    assert summary["by_kind"] == dict(
        Counter(pq.read_table(tmp_path / "truth")["kind"].to_pylist())
    )


@pytest.mark.parametrize("rows_per_file", [0, -1])
def test_write_corpus_refuses_bad_rows_per_file(tmp_path, rows_per_file):
    with pytest.raises(UserError, match="rows per file"):
        write_corpus(str(tmp_path), 10, rows_per_file=rows_per_file)
    assert not (tmp_path / "corpus").exists()


def test_write_corpus_refuses_a_file_as_directory(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="not a directory"):
        write_corpus(str(tmp_path / "file"), 10)


def test_a_generated_directory_stands_for_its_part(tmp_path):
    write_corpus(str(tmp_path / "gen"), 10, mean_words=20)
    assert generated_part(str(tmp_path / "gen"), "truth") == str(tmp_path / "gen" / "truth")
    assert generated_part(str(tmp_path / "gen"), "corpus") == str(tmp_path / "gen" / "corpus")
    assert generated_part(str(tmp_path / "gen"), "other") == str(tmp_path / "gen")
    assert generated_part(str(tmp_path / "gen" / "corpus"), "corpus") == str(
        tmp_path / "gen" / "corpus"
    )
    assert generated_part("s3://bucket/gen", "truth") == "s3://bucket/gen"


def test_streamed_files_are_the_in_memory_tables_across_spill_buckets(tmp_path, monkeypatch):
    """write_corpus streams (spill by destination file, then row order): with 12 files in 2
    spill buckets, over two batches of originals, the files hold generate_corpus's tables."""
    monkeypatch.setattr(spill, "MAX_BUCKETS", 2)
    summary = write_corpus(str(tmp_path), 8000, seed=11, mean_words=30, rows_per_file=700)
    names = sorted(p.name for p in (tmp_path / "corpus").iterdir())
    assert len(names) == summary["files"] == 12
    corpus = pa.concat_tables(pq.read_table(tmp_path / "corpus" / name) for name in names)
    truth = pq.read_table(tmp_path / "truth")
    assert corpus_digest(corpus, truth) == DIGESTS[(8000, 11, 30)]
    assert [pq.ParquetFile(tmp_path / "corpus" / n).metadata.num_rows for n in names] == [
        700
    ] * 11 + [300]
    assert sorted(p.name for p in tmp_path.iterdir()) == [OWNERSHIP_FILE, "corpus", "truth"]


def test_a_failed_generation_leaves_the_old_corpus_and_no_debris(tmp_path, monkeypatch):
    write_corpus(str(tmp_path), 30, seed=1, mean_words=20)
    before = pq.read_table(tmp_path / "corpus")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(generate, "_write_truth", broken)
    with pytest.raises(OSError, match="disk full"):
        write_corpus(str(tmp_path), 50, seed=2, mean_words=20, overwrite=True)
    assert pq.read_table(tmp_path / "corpus").equals(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == [OWNERSHIP_FILE, "corpus", "truth"]


@pytest.mark.parametrize("rel", ["corpus/notes.txt", "truth/mine.parquet", "corpus/sub/x"])
def test_overwrite_replaces_only_what_generate_wrote(tmp_path, rel):
    """A user's file in corpus/ or truth/ stops --overwrite (named, kept); a DIRECTORY an
    earlier version wrote (part files, no record) is replaced."""
    write_corpus(str(tmp_path), 30, seed=1, mean_words=20)
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text("the user's own\n")
    with pytest.raises(UserError, match="did not write: " + rel.split("/sub")[0]):
        write_corpus(str(tmp_path), 50, seed=2, mean_words=20, overwrite=True)
    assert (tmp_path / rel).read_text() == "the user's own\n"
    (tmp_path / rel).unlink()
    if rel.endswith("/x"):
        (tmp_path / rel).parent.rmdir()
    (tmp_path / OWNERSHIP_FILE).unlink()  # as an earlier version left it
    write_corpus(str(tmp_path), 50, seed=2, mean_words=20, overwrite=True)
    assert pq.read_table(tmp_path / "corpus").num_rows == 50
