"""The generated site-template corpus: deterministic, each page its template plus its body,
cross-site copies on two sites with the same body, and the removal score."""

from __future__ import annotations

import doctest

import pyarrow as pa
import pytest

from neardup_spark.cli.app import main
from neardup_spark.quality import templates
from neardup_spark.quality.templates import generate_template_corpus, template_removal


@pytest.fixture(scope="module")
def generated():
    return generate_template_corpus(1000, seed=4, mean_words=100)


def test_doctests():
    assert doctest.testmod(templates).failed == 0


def test_same_arguments_same_tables(generated):
    again = generate_template_corpus(1000, seed=4, mean_words=100)
    assert all(a.equals(b) for a, b in zip(generated, again, strict=True))
    other = generate_template_corpus(1000, seed=5, mean_words=100)
    assert not generated[0].equals(other[0])


def test_pages_are_their_template_and_body(generated):
    corpus, _, lines = generated
    assert corpus.column_names == ["id", "site", "url", "text"]
    ids = corpus.column("id").to_pylist()
    assert ids == sorted(ids) and len(set(ids)) == 1000
    assert lines.column("id").to_pylist() == ids
    for text, body, template in zip(
        corpus.column("text").to_pylist()[:50],
        lines.column("body").to_pylist()[:50],
        lines.column("template").to_pylist()[:50],
        strict=True,
    ):
        assert body in text
        rest = text.replace(body, "").split("\n")
        assert sorted(line for line in rest if line) == sorted(template)
        assert 4 <= len(template) <= 13  # 1-3 navigation, heading + 5 headlines, 2-4 footer
    sites = len(set(corpus.column("site").to_pylist()))
    assert sites == round(1000 / templates.PAGES_PER_SITE)


def test_cross_site_copies_share_their_body_on_two_sites(generated):
    corpus, truth, lines = generated
    assert truth.num_rows == round(templates.CROSS_SITE_FRACTION * 1000)
    site = dict(
        zip(corpus.column("id").to_pylist(), corpus.column("site").to_pylist(), strict=True)
    )
    body = dict(zip(lines.column("id").to_pylist(), lines.column("body").to_pylist(), strict=True))
    pairs = list(
        zip(truth.column("doc_a").to_pylist(), truth.column("doc_b").to_pylist(), strict=True)
    )
    assert all(a < b and site[a] != site[b] and body[a] == body[b] for a, b in pairs)
    in_pairs = [d for pair in pairs for d in pair]
    assert len(in_pairs) == len(set(in_pairs))  # no page in two pairs
    assert set(truth.column("kind").to_pylist()) == {"cross_site"}


def test_template_removal_scores(generated):
    corpus, _, lines = generated
    ids = corpus.column("id")
    untouched = template_removal(corpus.select(["id", "text"]), lines)
    assert untouched["template_lines_removed"] == 0 and untouched["body_kept_share"] == 1.0
    bodies = pa.table({"id": ids, "text": lines.column("body")})
    perfect = template_removal(bodies, lines)
    assert perfect["template_removed_share"] == 1.0 and perfect["body_kept_share"] == 1.0
    empty = template_removal(pa.table({"id": ids, "text": pa.nulls(len(ids), pa.string())}), lines)
    assert empty["template_removed_share"] == 1.0 and empty["body_kept_share"] == 0.0


def test_generate_command_writes_the_three_tables(tmp_path, capsys):
    assert main(["generate", str(tmp_path / "t"), "--templates", "--docs", "300"]) == 0
    assert "wrote 300 pages of 2 sites" in capsys.readouterr().out
    for name in ("corpus", "truth", "lines"):
        assert (tmp_path / "t" / name / "part-00000.parquet").exists()
    assert main(["generate", str(tmp_path / "t"), "--templates", "--docs", "300"]) == 2
