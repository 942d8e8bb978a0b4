"""The ingest as a Spark job: the corpus contract, texts, counts, options, and an OUTPUT that is
staged and committed like a dedupe run's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.ingest import job
from neardup_spark.ingest.job import ingest
from neardup_spark.ingest.schema import CORPUS_COLUMNS
from neardup_spark.pipeline.dedupe import run

SHARED_WARC = Path(__file__).resolve().parents[3] / "shared" / "data" / "warc"


def read_parquet(path: Path) -> list[dict[str, Any]]:
    return ds.dataset(str(path)).to_table().to_pylist()


@pytest.fixture(scope="module")
def ingested(spark, warc_inputs, tmp_path_factory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("ingest") / "out"
    summary = ingest(spark, [str(warc_inputs["first"]), str(warc_inputs["dir"])], str(out))
    return {"out": out, "summary": summary, "rows": read_parquet(out)}


def test_ingest_writes_the_corpus_contract(ingested):
    out, rows = ingested["out"], ingested["rows"]
    assert (out / "_SUCCESS").exists() and (out / "_summary.json").exists()
    names = sorted(p.name for p in out.iterdir() if not p.name.endswith(".crc"))
    data = [n for n in names if n.startswith("part-") and n.endswith(".parquet")]
    assert data and sorted(set(names) - set(data)) == [
        "_SUCCESS",
        "_neardup.json",
        "_skipped",
        "_summary.json",
    ]
    # committed: OUTPUT is the corpus; no staging directory left (Hadoop's .crc files aside)
    schema = ds.dataset(str(out)).schema
    assert tuple(schema.names) == CORPUS_COLUMNS
    assert str(schema.field("http_status").type) == "int32"
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(
        f"<urn:uuid:{i}>"
        for i in (
            "utf8",
            "latin1",
            "broken",
            "meta1251",
            "badutf8",
            "gzipped",
            "mislabelled",
            "plain-file",
            "wet1",
        )
    )
    for row in rows:
        assert row["text_bytes"] == len(row["text"].encode())
        assert row["raw_bytes"] > 0 and row["source_file"]
        assert row["fetch_date"] is not None


def test_ingest_texts(ingested):
    by_id = {r["id"].removeprefix("<urn:uuid:").removesuffix(">"): r for r in ingested["rows"]}
    utf8 = by_id["utf8"]
    assert "stone bridge" in utf8["text"] and "東京" in utf8["text"]
    assert "Subscribe" not in utf8["text"]  # --extract main drops the navigation
    assert utf8["url"] == "http://example.com/utf8" and utf8["http_status"] == 200
    assert utf8["content_type"] == "text/html" and utf8["charset"] == "utf-8"
    assert "a.warc.gz" in utf8["source_file"]  # the first of the two records with this id
    assert "Crème brûlée" in by_id["latin1"]["text"] and by_id["latin1"]["charset"] == "cp1252"
    assert "Мост через реку" in by_id["meta1251"]["text"]
    assert "tail words here" in by_id["broken"]["text"]
    assert by_id["badutf8"]["replaced_chars"] == 2 and "\ufffd" in by_id["badutf8"]["text"]
    assert "Compressed body" in by_id["gzipped"]["text"]
    assert "Stored decoded" in by_id["mislabelled"]["text"]
    assert by_id["mislabelled"]["http_status"] == 404
    wet = by_id["wet1"]
    assert wet["text"] == "Plain text of a WET conversion record.\nSecond line."
    assert wet["record_type"] == "conversion" and wet["http_status"] is None


def test_ingest_summary_counts_everything(ingested):
    summary = ingested["summary"]
    assert summary == json.loads((ingested["out"] / "_summary.json").read_text())
    assert summary["files"] == 4
    assert summary["records_by_type"] == {
        "conversion": 1,
        "request": 1,
        "response": 12,
        "warcinfo": 2,
    }
    assert summary["records"] == 16
    assert summary["documents"] == 9 == len(ingested["rows"])
    assert summary["skipped"] == {
        "record_type": 3,
        "content_type": 1,
        "empty_payload": 1,
        "binary_payload": 1,
        "too_large": 0,
        "no_record_id": 0,
        "duplicate_id": 1,
        "record_error": 0,
        "file_error": 1,
    }
    assert summary["skipped_content_types"] == {"image/png": 1}
    assert summary["duplicate_ids"] == 1
    assert summary["file_errors"][0]["file"].endswith("broken.warc.gz")
    assert summary["decoding"]["documents_with_replacements"] == 1
    assert summary["decoding"]["replaced_chars"] == 2
    assert summary["documents_http_status"] == {"200": 7, "404": 1, "none": 1}
    out = str(ingested["out"])
    assert summary["output"] == {"corpus": out, "skipped": f"{out}/_skipped"}
    # Every record is either a document or listed in _skipped/ with its reason.
    skipped = read_parquet(ingested["out"] / "_skipped")
    reasons = sorted(r["skip_reason"] for r in skipped)
    assert len(skipped) == 16 - 9 + 1  # + the broken file's row
    assert reasons.count("duplicate_id") == 1 and reasons.count("record_type") == 3
    dup = next(r for r in skipped if r["skip_reason"] == "duplicate_id")
    assert dup["source_file"].endswith("b.warc")


def test_dedupe_reads_the_ingested_output_as_its_input(spark, ingested, tmp_path):
    report = run(spark, str(ingested["out"]), str(tmp_path / "deduped"), build_config())
    assert report["counts"]["input_rows"] == ingested["summary"]["documents"] == 9
    clusters = read_parquet(tmp_path / "deduped" / "clusters")
    assert sorted(r["doc_id"] for r in clusters) == sorted(r["id"] for r in ingested["rows"])


def test_extract_text_keeps_the_navigation(spark, warc_inputs, ingested, tmp_path):
    out = tmp_path / "text"
    summary = ingest(spark, [str(warc_inputs["first"])], str(out), extract="text")
    rows = {r["id"]: r for r in read_parquet(out)}
    assert "Subscribe" in rows["<urn:uuid:utf8>"]["text"]
    assert "stone bridge" in rows["<urn:uuid:utf8>"]["text"]
    assert summary["options"]["extract"] == "text" and summary["documents"] == 7


def test_record_and_content_type_options(spark, warc_inputs, tmp_path):
    out = tmp_path / "png"
    summary = ingest(
        spark,
        [str(warc_inputs["first"])],
        str(out),
        record_types=["response"],
        content_types=["text/html", "image/png"],
    )
    # image/png is now wanted, and still skipped as binary, not decoded into garbage text
    assert summary["skipped"]["binary_payload"] == 2 and summary["skipped"]["content_type"] == 0
    with pytest.raises(UserError, match="--record-types"):
        ingest(spark, [str(warc_inputs["first"])], str(tmp_path / "x"), record_types=["request"])


def test_inputs_are_checked_before_output_is_touched(spark, warc_inputs, tmp_path):
    with pytest.raises(UserError, match="at least one WARC"):
        ingest(spark, [], str(tmp_path / "out"))
    first = str(warc_inputs["first"])
    with pytest.raises(UserError, match="must not overlap"):
        ingest(spark, [first], first + "/")
    directory = str(warc_inputs["dir"])
    with pytest.raises(UserError, match="must not overlap"):  # OUTPUT inside an input
        ingest(spark, [first, directory], directory + "/ingested")
    with pytest.raises(UserError, match="must not overlap"):  # an input inside OUTPUT
        ingest(spark, [directory], str(Path(directory).parent))
    with pytest.raises(UserError, match="input not found"):
        ingest(spark, [str(tmp_path / "nope.warc.gz")], str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_finished_output_is_refused_without_overwrite(spark, warc_inputs, tmp_path):
    out = tmp_path / "out"
    first = ingest(spark, [str(warc_inputs["first"])], str(out))
    with pytest.raises(UserError, match="already holds a finished ingest"):
        ingest(spark, [str(warc_inputs["first"])], str(out))
    again = ingest(spark, [str(warc_inputs["first"])], str(out), overwrite=True)
    assert again["documents"] == first["documents"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me")
    with pytest.raises(UserError, match="did not write"):
        ingest(spark, [str(warc_inputs["first"])], str(foreign), overwrite=True)
    assert (foreign / "mine.txt").exists()
    # A user's files under the names ingest writes, in its finished OUTPUT: named, kept.
    for rel in ("part-00000-mine.parquet", "_skipped/notes.txt", "_summary.json.bak", "_SUCCESS"):
        placed = out / rel
        placed.parent.mkdir(parents=True, exist_ok=True)
        kept = placed.read_bytes() if placed.exists() else b"the user's own"
        if rel == "_SUCCESS":  # the job's own: stands for a file the user replaced it with
            record = json.loads((out / "_neardup.json").read_text())
            record["files"].remove("_SUCCESS")
            (out / "_neardup.json").write_text(json.dumps(record))
        placed.write_bytes(kept)
        with pytest.raises(UserError, match=f"did not write: {rel.split('/')[0]}"):
            ingest(spark, [str(warc_inputs["first"])], str(out), overwrite=True)
        assert placed.read_bytes() == kept
        if rel != "_SUCCESS":
            placed.unlink()
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    with pytest.raises(UserError, match="exists and is a file"):
        ingest(spark, [str(warc_inputs["first"])], str(a_file), overwrite=True)
    assert a_file.read_text() == "not a directory"


def test_a_failed_rerun_leaves_the_previous_output_intact(
    spark, warc_inputs, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    ingest(spark, [str(warc_inputs["first"])], str(out))
    corpus_before = sorted(r["id"] for r in read_parquet(out))
    summary_before = (out / "_summary.json").read_text()

    def fail(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("killed after staging")

    # A rerun over other inputs that dies after writing its tables, before its commit.
    monkeypatch.setattr(job, "build_summary", fail)
    with pytest.raises(RuntimeError, match="killed after staging"):
        ingest(spark, [str(warc_inputs["dir"])], str(out), overwrite=True)
    assert len(list((out / "_staging").glob("*/corpus/*.parquet"))) > 0  # it got that far
    assert (out / "_SUCCESS").exists()
    assert (out / "_summary.json").read_text() == summary_before
    assert sorted(r["id"] for r in read_parquet(out)) == corpus_before
    monkeypatch.undo()

    with pytest.raises(UserError, match="already holds a finished ingest"):
        ingest(spark, [str(warc_inputs["dir"])], str(out))
    again = ingest(spark, [str(warc_inputs["dir"])], str(out), overwrite=True)
    assert not (out / "_staging").exists()
    corpus_after = sorted(r["id"] for r in read_parquet(out))
    assert corpus_after != corpus_before and len(corpus_after) == again["documents"] == 3


# --------------------------------------------------------------------------------------------
# Real Common Crawl samples, when ../shared/data/warc is there


@pytest.mark.skipif(
    not SHARED_WARC.is_dir(),
    reason=f"needs the Common Crawl samples at {SHARED_WARC} (../shared/data/warc beside the "
    "clone; CI has them there): not run",
)
def test_real_samples_then_dedupe(spark, tmp_path):
    out = tmp_path / "ingested"
    summary = ingest(spark, [str(SHARED_WARC)], str(out))
    assert summary["files"] == 2 and summary["skipped"]["file_error"] == 0
    assert summary["records_by_type"]["response"] == 169
    assert summary["documents"] >= 150
    assert summary["skipped_content_types"].get("application/pdf") == 6
    corpus = read_parquet(out)
    assert len(corpus) == summary["documents"]
    assert sum(1 for r in corpus if len(r["text"].split()) >= 50) >= 100

    report = run(spark, str(out), str(tmp_path / "deduped"), build_config())
    clusters = read_parquet(tmp_path / "deduped" / "clusters")
    assert report["counts"]["input_rows"] == len(corpus)
    assert sorted(r["doc_id"] for r in clusters) == sorted(r["id"] for r in corpus)
    members = {r["doc_id"]: r["cluster_id"] for r in clusters}
    assert all(members[c] == c for c in members.values())  # representatives are members
    assert (tmp_path / "deduped" / "_SUCCESS").exists()
