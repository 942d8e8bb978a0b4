"""The plan's choices, from hand-made facts, without Spark: each step's implementation and its
reason, the thresholds of the execution settings, and given choices checked against the facts."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from neardup_spark.config import ExecutionSettings
from neardup_spark.errors import UserError
from neardup_spark.pipeline.facts import EngineFacts, InputFacts, ParquetFileFacts, RunFacts
from neardup_spark.pipeline.plan import (
    DRIVER_MAX_TEXT_CHARS,
    Choice,
    Plan,
    decide_components,
    decide_deduplicated,
    decide_index_scan,
    decide_night,
    decide_night_components,
    decide_night_sketch,
    decide_pairs,
    decide_probe,
    decide_sketch,
    decide_verify_texts,
    python_tasks_expected,
)

SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("lang", pa.string())])
MB = 2**20


def parquet_file(path: str = "/d/part-0.parquet", rows: int = 1000, mb: int = 1, **kw):
    return ParquetFileFacts(path, kw.get("schema", SCHEMA), (rows,), (mb * MB,))


def facts(files: int = 4, mb: int = 1, rows: int = 1000, **changes) -> RunFacts:
    """A local Parquet input of ``files`` files in local mode on two cores, a local OUTPUT."""
    parquet = tuple(parquet_file(f"/d/part-{i}.parquet", rows, mb) for i in range(files))
    source = InputFacts(
        "/d", tuple(f"file:/d/part-{i}.parquet" for i in range(files)), "parquet",
        local_files=True, parquet=parquet, copy_problem=None,
    )  # fmt: skip
    input_changes = {k: changes.pop(k) for k in list(changes) if hasattr(source, k)}
    engine_changes = {k: changes.pop(k) for k in list(changes) if hasattr(EngineFacts(), k)}
    return RunFacts(
        dataclasses.replace(source, **input_changes),
        dataclasses.replace(EngineFacts(), **engine_changes),
        output_local=changes.pop("output_local", True),
        **changes,
    )


SETTINGS = ExecutionSettings()


def test_the_per_document_pass_runs_here_within_the_bytes_limit_else_in_tasks():
    small = decide_sketch(facts(mb=1), SETTINGS)
    assert small.where == "driver" and "4.0 MB <= driver_read_max_bytes 512.0 MB" in small.why
    large = decide_sketch(facts(mb=200), SETTINGS)
    assert large.where == "tasks" and "800.0 MB > driver_read_max_bytes" in large.why
    assert large.feasible == ("driver", "tasks", "spark")
    night = decide_sketch(facts(rows=50_000), SETTINGS, max_rows=100_000)
    assert night.where == "tasks" and "200,000 docs > nightly_driver_max_docs" in night.why
    off = decide_sketch(facts(), dataclasses.replace(SETTINGS, driver_read_max_bytes=0))
    assert off.where == "spark" and off.why == "driver_read_max_bytes 0"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"cleaning": True}, "--strip-boilerplate"),
        ({"table": True}, "a catalog table"),
        ({"skipped": 2}, "2 input file(s) skipped"),
        ({"local_threads": 0, "master": "spark://m:7077"}, "other machines (spark://m:7077)"),
        ({"parquet": ()}, "not local Parquet files"),
        (
            {"parquet": (parquet_file(schema=pa.schema([("id", pa.string())])),)},
            "lacks the id or text column",
        ),
        (
            {
                "parquet": (
                    parquet_file(schema=pa.schema([("id", pa.float64()), ("text", pa.string())])),
                )
            },
            "an id column of type double",
        ),
        (
            {
                "parquet": (
                    parquet_file("/a"),
                    parquet_file(
                        "/b", schema=pa.schema([("id", pa.string()), ("text", pa.binary())])
                    ),
                )
            },
            "both string and binary",
        ),
    ],
)
def test_what_keeps_the_pass_in_spark_and_allows_no_other_choice(changes, why):
    choice = decide_sketch(facts(**changes), SETTINGS)
    assert choice.where == "spark" and why in choice.why and choice.feasible == ("spark",)


def test_pairs_here_up_to_driver_max_docs_and_the_texts_the_driver_may_fetch():
    here = Choice("sketch", "driver", "")
    spark = Choice("sketch", "spark", "")
    assert decide_pairs(facts(), SETTINGS, {"input_rows": 5000}, spark).why == (
        "5,000 docs <= driver_max_docs 200,000"
    )
    assert decide_pairs(facts(), SETTINGS, {"input_rows": 200_001}, here).where == "spark"
    many_chars = {"input_rows": 10, "text_chars": DRIVER_MAX_TEXT_CHARS + 1}
    assert decide_pairs(facts(), SETTINGS, many_chars, spark).where == "spark"
    assert decide_pairs(facts(), SETTINGS, many_chars, here).where == "driver"
    unordered = decide_pairs(facts(id_type_ordered=False), SETTINGS, {"input_rows": 1}, here)
    assert unordered.where == "spark" and unordered.feasible == ("spark",)


def test_verification_texts():
    assert decide_verify_texts(facts(), SETTINGS, 10**9, True, True).where == "addresses"
    remote = facts(parquet=(), local_files=False)
    assert decide_verify_texts(remote, SETTINGS, 100, True, True).where == "broadcast"
    bitmap = decide_verify_texts(remote, SETTINGS, 3_000_000, True, True)
    assert (
        bitmap.where == "bitmap" and "3,000,000 sides > broadcast_max_rows 2,000,000" in bitmap.why
    )
    assert decide_verify_texts(remote, SETTINGS, 3_000_000, False, False).where == "join"
    assert decide_verify_texts(facts(cleaning=True), SETTINGS, 10, True, True).feasible == (
        "cleaned",
    )
    assert decide_verify_texts(facts(), SETTINGS, 10, True, True).feasible == (
        "addresses", "broadcast", "bitmap", "join"
    )  # fmt: skip


def test_components():
    driver, spark = Choice("pairs", "driver", ""), Choice("pairs", "spark", "")
    assert decide_components(100, 1000, driver, True).why.endswith("members found here")
    assert decide_components(100, 1000, driver, False).why.endswith("labels found here")
    assert decide_components(100, 1000, spark, True).feasible == ("single_task", "distributed")
    big = decide_components(2000, 1000, driver, True)
    assert big.where == "distributed" and big.why == "2,000 edges > 1,000 one task holds"


def test_deduplicated():
    assert decide_deduplicated(facts(), SETTINGS, 10, True, True, True).where == "driver_copy"
    assert decide_deduplicated(facts(), SETTINGS, 10, False, True, True).where == "task_copy"
    few = decide_deduplicated(facts(files=1), SETTINGS, 10, False, True, True)
    assert few.where == "spark_join" and few.why == "1 input files < 2 cores"
    assert few.feasible == ("task_copy", "spark_join", "spark_bitmap")
    typed = decide_deduplicated(
        facts(copy_problem="a date64 column"), SETTINGS, 10, True, True, True
    )
    assert typed.where == "spark_join" and typed.why == "a date64 column"
    skipped = decide_deduplicated(facts(skipped=1), SETTINGS, 10, True, True, True)
    assert skipped.why == "1 input file(s) skipped" and "driver_copy" not in skipped.feasible
    remote = decide_deduplicated(facts(output_local=False), SETTINGS, 3_000_000, True, True, True)
    assert remote.where == "spark_bitmap" and remote.why.startswith("OUTPUT is not local")
    api = decide_deduplicated(facts(output_local=None), SETTINGS, 10, True, False, False)
    assert api.where == "spark_join" and api.feasible == ("spark_join",)


def test_night():
    assert decide_night(SETTINGS, 100_000).where == "driver"
    assert decide_night(SETTINGS, 100_001).why == "100,001 docs > nightly_driver_max_docs 100,000"


def test_a_given_choice_must_be_feasible_and_is_reported_as_given():
    given = dataclasses.replace(SETTINGS, plan={"sketch": "tasks", "pairs": "spark"})
    plan = Plan(facts(), given)
    assert plan.record(decide_sketch(facts(), SETTINGS)).where == "tasks"
    assert plan.section()["sketch"] == {"where": "tasks", "why": "given"}
    plan = Plan(facts(table=True), dataclasses.replace(SETTINGS, plan={"sketch": "driver"}))
    with pytest.raises(UserError, match=r"sketch=driver is not possible .*a catalog table"):
        plan.record(decide_sketch(facts(table=True), SETTINGS))
    with pytest.raises(UserError, match="no step sketch=gpu"):
        Plan(facts(), dataclasses.replace(SETTINGS, plan={"sketch": "gpu"}))


def test_plan_lines_say_each_choice_and_why():
    plan = Plan(facts(), SETTINGS)
    plan.record(decide_sketch(facts(), SETTINGS))
    plan.record(decide_night(SETTINGS, 5))
    assert plan.lines() == [
        "sketch: driver (id and text columns 4.0 MB <= driver_read_max_bytes 512.0 MB)",
        "night: driver (5 docs <= nightly_driver_max_docs 100,000)",
    ]
    assert plan.where("pairs") is None


def test_a_nights_pass_is_here_or_the_stashing_spark_pass():
    assert decide_night_sketch(facts(), SETTINGS).where == "driver"
    big = decide_night_sketch(facts(rows=40_000), SETTINGS)  # 160,000 docs > 100,000
    assert big.where == "spark" and big.feasible == ("driver", "spark")
    given = dataclasses.replace(SETTINGS, plan={"night": "spark"})
    assert decide_night_sketch(facts(), given).feasible == ("spark",)
    assert decide_night_sketch(facts(table=True), SETTINGS).feasible == ("spark",)


def test_index_scans_probe_and_night_components():
    assert decide_index_scan("docs", 10, True, SETTINGS).where == "driver"
    assert decide_index_scan("docs", 10, False, SETTINGS).feasible == ("spark",)
    many = decide_index_scan("pairs", 20_000_001, True, SETTINGS)
    assert many.step == "pairs_scan" and many.where == "spark"
    assert decide_probe(facts()).where == "driver"
    assert decide_probe(facts(local_threads=0)).where == "spark"
    assert decide_night_components(10, 10).where == "driver"
    assert decide_night_components(11, 10).where == "spark"


def test_python_tasks_are_expected_unless_every_step_runs_here():
    assert not python_tasks_expected(facts(), SETTINGS)
    assert python_tasks_expected(facts(mb=200), SETTINGS)  # the pass in tasks
    assert python_tasks_expected(facts(rows=60_000), SETTINGS)  # 240,000 > driver_max_docs
    assert python_tasks_expected(facts(cleaning=True), SETTINGS)
