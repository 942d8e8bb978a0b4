"""The measurements behind the boilerplate defaults: the grids on generated and real pages, and
the score of a dedupe run over a template corpus (written by hand here; no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from neardup_spark.cli.app import main
from neardup_spark.quality.boilerplate_eval import (
    chrome_and_content,
    real_page_grid,
    score_template_run,
    template_grid,
)
from neardup_spark.quality.templates import write_template_corpus


def test_template_grid_on_a_small_corpus():
    rows = template_grid(600, seed=2, min_docs=(2, 5), min_words=(2, 40))
    assert len(rows) == 2 * 2 * 2 * 2
    best = next(
        r
        for r in rows
        if (r["unit"], r["grouped"], r["min_docs"], r["min_words"]) == ("line", False, 5, 2)
    )
    assert best["template_removed"] > 0.99 and best["body_kept"] == 1.0
    # Two documents share a body: min_docs 2 without grouping removes the copies' bodies.
    loose = next(
        r
        for r in rows
        if (r["unit"], r["grouped"], r["min_docs"], r["min_words"]) == ("line", False, 2, 2)
    )
    assert loose["body_kept"] < 1.0
    # Lines of 40 words are never template: nothing goes (paragraphs of the blocks still do).
    assert all(
        r["template_removed"] == 0 for r in rows if (r["unit"], r["min_words"]) == ("line", 40)
    )


def test_chrome_is_what_the_main_content_lacks():
    labels = chrome_and_content(
        ["Home\nThe story, told.\nThe story told\n\nFooter"], ["the STORY told"]
    )
    assert labels == [[True, False, True, True]]  # one main line claims one full-text line


def _write(path, table):
    path.mkdir(parents=True)
    pq.write_table(table, path / "part-0.parquet")
    return str(path)


def test_real_page_grid_counts_chrome_and_content(tmp_path):
    full = [
        f"Menu: home news sport\nStory {i} of its own words\nCopyright the site" for i in range(6)
    ]
    main_texts = [f"Story {i} of its own words" for i in range(6)]
    ids = [f"p{i}" for i in range(6)]
    text_dir = _write(tmp_path / "text", pa.table({"id": ids, "text": full}))
    main_dir = _write(tmp_path / "main", pa.table({"id": ids, "text": main_texts}))
    totals, rows = real_page_grid(text_dir, main_dir, min_docs=(5, 10), min_words=(2,))
    assert totals == {
        "pages": 6,
        "lines": 18,
        "chrome_lines": 12,
        "content_chars": sum(len(t) + 1 for t in main_texts),
    }
    assert [(r["chrome_removed"], r["content_chars_removed"]) for r in rows] == [
        (1.0, 0.0),
        (0.0, 0.0),
    ]


def test_score_of_a_run_over_a_template_corpus(tmp_path, capsys):
    write_template_corpus(str(tmp_path / "t"), 200, seed=1, mean_words=50)
    truth = pq.read_table(tmp_path / "t" / "truth")
    corpus = pq.read_table(tmp_path / "t" / "corpus")
    ids = corpus.column("id").to_pylist()
    a, b = truth.column("doc_a").to_pylist(), truth.column("doc_b").to_pylist()
    cluster = {d: d for d in ids} | {y: x for x, y in zip(a[:-1], b[:-1], strict=True)}
    _write(
        tmp_path / "out" / "clusters",
        pa.table({"doc_id": ids, "cluster_id": [cluster[d] for d in ids]}),
    )
    pairs = {"doc_a": [a[0], ids[0]], "doc_b": [b[0], ids[1]]}  # a copy and an unrelated pair
    _write(tmp_path / "out" / "pairs", pa.table(pairs))
    scores = score_template_run(str(tmp_path / "out"), str(tmp_path / "t"))
    assert scores["copies_joined"] == (len(a) - 1) / len(a)
    assert scores["pairs"] == 2 and scores["pairs_similar_bodies"] == 0.5
    assert main(["eval-boilerplate", "--run", str(tmp_path / "out"), str(tmp_path / "t")]) == 0
    assert "pairs_similar_bodies   50.00" in capsys.readouterr().out
