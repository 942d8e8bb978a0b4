"""``neardup explain INPUT ID --output OUTPUT``: why a finished run removed a document (its kept
document, the similarity clusters/ records and their Jaccard computed again) or kept it; the
pair form keeps its behaviour."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from neardup_spark.cli import main
from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.quality.removal import removal
from tests.nightly.history import read


@pytest.fixture(scope="module", params=["anchored", "components"])
def finished(request, spark, tmp_path_factory):
    """A corpus with near-duplicates, deduped under each rule."""
    root = tmp_path_factory.mktemp(f"removal-{request.param}")
    table, _ = generate_corpus(200, seed=17, mean_words=80)
    (root / "in").mkdir()
    pq.write_table(table, root / "in" / "part-0.parquet")
    config = build_config(options={"cluster_rule": request.param})
    report = run(spark, str(root / "in"), str(root / "out"), config)
    assert report["counts"]["removed"] > 0
    return request.param, str(root / "in"), str(root / "out")


def removed_rows(out: str) -> list[dict]:
    clusters = read(f"{out}/clusters")
    return clusters.filter(pc.invert(clusters["is_representative"])).to_pylist()


def test_a_removed_document_names_its_kept_one_and_their_jaccard(finished, capsys):
    rule, corpus, out = finished
    near = [r for r in removed_rows(out) if r.get("similarity", 0.0) < 1.0] or removed_rows(out)
    row = near[0]
    found = removal(out, str(row["doc_id"]))  # an id as the command line gives it
    assert found["removed"] and found["cluster_id"] == row["cluster_id"]
    assert found["cluster_rule"] == rule and found["cluster_size"] >= 2
    assert main(["explain", corpus, str(row["doc_id"]), "--output", out, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["removal"]["cluster_id"] == row["cluster_id"]
    assert result["ids"] == [row["doc_id"], row["cluster_id"]]
    if rule == "anchored":  # removed only for a kept document it is verified near
        assert found["similarity"] == pytest.approx(row["similarity"])
        assert result["jaccard"] == pytest.approx(found["similarity"])
        assert result["jaccard"] >= 0.8 and result["paired"]
    else:
        assert found["similarity"] is None
    assert main(["explain", corpus, str(row["doc_id"]), "--output", out]) == 0
    text = capsys.readouterr().out
    assert text.startswith("removed ") and f"kept document is {row['cluster_id']!r}" in text
    assert "jaccard " in text and "verdict " in text


def test_a_kept_document_says_for_how_many_it_stands(finished, capsys):
    _, corpus, out = finished
    kept = removed_rows(out)[0]["cluster_id"]
    found = removal(out, kept)
    assert not found["removed"] and found["similarity"] is None
    size = sum(1 for r in removed_rows(out) if r["cluster_id"] == kept) + 1
    assert found["cluster_size"] == size
    deduplicated = read(f"{out}/deduplicated").to_pylist()
    assert [r["duplicates"] for r in deduplicated if r["id"] == kept] == [size - 1]
    assert main(["explain", corpus, str(kept), "--output", out]) == 0
    text = capsys.readouterr().out
    assert text.startswith("kept ") and f"standing for {size - 1:,} removed" in text
    assert "verdict" not in text


def test_explain_refuses_what_it_cannot_answer(finished, capsys):
    _, corpus, out = finished
    with pytest.raises(UserError, match="not in"):
        removal(out, "no-such-id")
    assert main(["explain", corpus, "no-such-id", "--output", out]) == 2
    assert main(["explain", corpus, "d1"]) == 2  # one id and no run
    assert "--output" in capsys.readouterr().err
