"""Where a decontamination run's corpus pass runs: a pure decision from the listed input."""

from __future__ import annotations

from neardup_spark.io.corpus import CorpusSource, ListedInput
from neardup_spark.pipeline.decontaminate import decide_corpus_pass


def listed(tmp_path, fmt: str, size: int, name: str = "a.parquet") -> ListedInput:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return ListedInput(CorpusSource(str(tmp_path)), [str(path)], True, fmt)


def test_small_local_parquet_runs_here(tmp_path):
    choice = decide_corpus_pass(listed(tmp_path, "parquet", 100), 2, 1000)
    assert (choice.where, choice.feasible) == ("driver", ("driver", "spark"))


def test_otherwise_spark(tmp_path):
    assert decide_corpus_pass(listed(tmp_path, "parquet", 2000), 2, 1000).where == "spark"
    json_input = decide_corpus_pass(listed(tmp_path, "json", 10, "a.jsonl"), 2, 1000)
    assert (json_input.where, json_input.feasible) == ("spark", ("spark",))
    assert decide_corpus_pass(listed(tmp_path, "parquet", 10), 0, 1000).feasible == ("spark",)
    partitioned = listed(tmp_path, "parquet", 10, "lang=en/a.parquet")
    assert decide_corpus_pass(partitioned, 2, 1000).where == "spark"
