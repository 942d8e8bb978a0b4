"""Column names as users have them: one corpus whose id, text, ``--prefer``, group and carried
columns are named ``doc.id``, ``body text``, ``we`ird``, ``note, desc``, ``a[0]``, ``größe``,
``名前`` (tests/odd_columns.py), run through every command and path that reads them, equals
the same corpus under plain names; ``deduplicated/`` keeps the odd names exactly. A missing
column under such a name is exit 2 with one ``error:`` line, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.odd_columns import (
    ID,
    PLAIN,
    PREFER,
    SCORE,
    SITE,
    TEXT,
    odd_table,
    plain,
    rows,
    write_corpus,
)
from tests.plans import ran
from tests.spark_state import cli_on_session

REPO = Path(__file__).resolve().parents[2]
# Boilerplate stripped per site ({site}: the group column's name) before fingerprinting.
STRIP = ("--strip-boilerplate", "--set", "boilerplate.group_col={site}")


def plan_args(steps: dict[str, str]) -> tuple[str, ...]:
    """``--set plan.STEP=WHERE`` for each of ``steps``."""
    return tuple(a for step, where in steps.items() for a in ("--set", f"plan.{step}={where}"))


# (input format, the plan's steps, options): the per-document pass and the pairs on the driver
# (the keep policy's representatives then chosen by Spark); Spark stages whose tasks read the
# files (the pass, verification at the documents' addresses, deduplicated/ copied by tasks);
# Spark reading the input, the boilerplate stripped per site first; JSON lines (read by Spark:
# not Parquet files).
VARIANTS: dict[str, tuple[str, dict[str, str], tuple[str, ...]]] = {
    "driver": ("parquet", {"sketch": "driver", "pairs": "driver"}, ()),
    "tasks-read": (
        "parquet",
        {
            "sketch": "tasks",
            "pairs": "spark",
            "verify_texts": "addresses",
            "deduplicated": "task_copy",
        },
        (),
    ),
    "spark-strip": (
        "parquet",
        {"sketch": "spark", "pairs": "spark", "verify_texts": "cleaned"},
        (*STRIP, "--set", "boilerplate.min_docs=3"),
    ),
    "json": ("json", {"sketch": "spark", "pairs": "driver"}, ()),
}
# The second night's steps as Spark jobs, its batch read by Spark.
SPARK_NIGHT = {"sketch": "spark", "night": "spark"}
NIGHT_SLICES = {"day1": (0, 36), "day2": (30, 60)}


def columns(kind: str) -> list[str]:
    """The id and text options of the corpus under ``kind`` names."""
    names = {ID: ID, TEXT: TEXT} if kind == "odd" else PLAIN
    return ["--id-col", names[ID], "--text-col", names[TEXT]]


def group(kind: str) -> str:
    return SITE if kind == "odd" else PLAIN[SITE]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The corpus under both names, as Parquet and as JSON lines (two files each), and the
    nights' batches as Parquet."""
    root = tmp_path_factory.mktemp("odd-columns")
    table = odd_table()
    paths = {}
    for kind, data in (("odd", table), ("plain", plain(table))):
        for fmt in ("parquet", "json"):
            paths[kind, fmt] = write_corpus(data, root / f"{kind}-{fmt}", fmt)
        for day, (start, stop) in NIGHT_SLICES.items():
            part = data.slice(start, stop - start)
            paths[kind, day] = write_corpus(part, root / f"{kind}-{day}", files=1)
    return {"root": root, "paths": paths, "table": table}


@pytest.fixture
def cli(spark):
    with cli_on_session(spark) as run:
        yield run


@pytest.fixture(scope="module")
def runs(spark, inputs):
    """Every variant deduped under both names, with the two-key keep policy."""
    root, paths = inputs["root"], inputs["paths"]
    outs = {}
    with cli_on_session(spark) as run:
        for variant, (fmt, steps, options) in VARIANTS.items():
            for kind in ("odd", "plain"):
                out = root / f"out-{variant}-{kind}"
                extra = [option.format(site=group(kind)) for option in options]
                extra += plan_args(steps)
                args = ["dedupe", str(paths[kind, fmt]), str(out), *columns(kind)]
                args += ["--prefer", PREFER[kind], *extra, "--no-report"]
                assert run(args) == 0, (variant, kind)
                outs[variant, kind] = out
    return outs


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_run_under_odd_names_equals_one_under_plain_names(runs, inputs, variant):
    odd, plain_out = runs[variant, "odd"], runs[variant, "plain"]
    for name in ("clusters", "pairs", "deduplicated"):
        assert rows(odd / name).equals(rows(plain_out / name)), name
    kept = ds.dataset(str(odd / "deduplicated")).schema.names
    assert sorted(kept) == sorted([*inputs["table"].column_names, "duplicates"])
    if VARIANTS[variant][0] == "parquet":  # Spark reads JSON's columns in name order
        assert kept == [*inputs["table"].column_names, "duplicates"]
    report = json.loads((odd / "report.json").read_text())
    ran(report, **VARIANTS[variant][1])
    assert report["config"]["prefer"] == PREFER["odd"]
    assert report["counts"]["removed"] > 0
    if variant == "spark-strip":
        assert report["boilerplate"]["counts"]["units_removed"] > 0


def test_the_keep_policy_reads_the_odd_columns(runs, inputs):
    """The representatives are the keep policy's (highest ``we`ird``), not the smallest ids."""
    clusters = rows(runs["driver", "odd"] / "clusters").to_pylist()
    table = inputs["table"]
    score = dict(zip(table.column(ID).to_pylist(), table.column(SCORE).to_pylist(), strict=True))
    members: dict[str, list[str]] = {}
    for row in clusters:
        members.setdefault(row["cluster_id"], []).append(row["doc_id"])
    large = [docs for docs in members.values() if len(docs) > 1]
    assert large
    for cluster_id, docs in members.items():
        assert score[cluster_id] == max(score[doc] for doc in docs)
    assert any(min(docs) != cid for cid, docs in members.items() if len(docs) > 1)


def test_nights_under_odd_names(spark, inputs, cli, tmp_path):
    """Two nights into an index (the second as Spark jobs): the same outputs as under plain
    names."""
    for kind in ("odd", "plain"):
        index = tmp_path / f"index-{kind}"
        for day in NIGHT_SLICES:
            out = tmp_path / f"{kind}-{day}"
            args = ["dedupe", str(inputs["paths"][kind, day]), str(out), *columns(kind)]
            args += ["--index", str(index), "--no-report"]
            if day == "day2":
                args += plan_args(SPARK_NIGHT)
            assert cli(args) == 0, (kind, day)
            report = json.loads((out / "report.json").read_text())
            ran(
                report,
                **(SPARK_NIGHT if day == "day2" else {"sketch": "driver", "night": "driver"}),
            )
    for day in NIGHT_SLICES:
        for name in ("clusters", "pairs", "changed_clusters", "deduplicated"):
            odd, other = tmp_path / f"odd-{day}" / name, tmp_path / f"plain-{day}" / name
            assert rows(odd).equals(rows(other)), (day, name)


def test_boilerplate_command_under_odd_names(inputs, cli, tmp_path):
    """``neardup boilerplate`` in repeats mode, per site, first occurrence by the keep order."""
    for kind in ("odd", "plain"):
        args = ["boilerplate", str(inputs["paths"][kind, "json"]), str(tmp_path / kind)]
        args += [*columns(kind), "--group-col", group(kind), "--mode", "repeats"]
        args += ["--prefer", PREFER[kind]]
        assert cli(args) == 0, kind
    cleaned = rows(tmp_path / "odd")
    assert cleaned.equals(rows(tmp_path / "plain"))
    assert sum(cleaned.column("boilerplate_units").to_pylist()) > 0


def test_explain_report_and_evaluate_read_the_odd_columns(runs, inputs, cli, capsys):
    for fmt in ("parquet", "json"):
        explained = {}
        for kind in ("odd", "plain"):
            path = str(inputs["paths"][kind, fmt])
            argv = ["explain", path, "doc-0000000", "doc-0000001", *columns(kind), "--json"]
            assert cli(argv) == 0
            result = json.loads(capsys.readouterr().out)
            explained[kind] = {k: v for k, v in result.items() if k not in ("input", "config")}
        assert explained["odd"] == explained["plain"]
        assert explained["odd"]["verdict"]
    out = runs["driver", "odd"]
    assert cli(["report", str(out)]) == 0
    first_text = inputs["table"].column(TEXT)[0].as_py()
    assert first_text[:40] in (out / "report.html").read_text()
    scores = {}
    for kind in ("odd", "plain"):
        target = runs["driver", kind]
        argv = ["evaluate", str(target), "--corpus", str(inputs["paths"][kind, "parquet"])]
        assert cli([*argv, "--json", str(target / "evaluation.json")]) == 0
        result = json.loads((target / "evaluation.json").read_text())
        oracle = result["oracle"]
        scores[kind] = {k: v for k, v in oracle.items() if k not in ("corpus", "seconds")}
        scores[kind]["summary"], scores[kind]["checks"] = result["summary"], result["checks"]
    assert scores["odd"] == scores["plain"]
    assert scores["odd"]["positives"] > 0 and scores["odd"]["recall"] == 1.0


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--prefer", "`we``ird` desc, `no such, col`"],
            "error: --prefer: no column 'no such, col' in the input",
        ),
        (["--prefer", "`we``ird desc"], "no closing backtick"),
        (["--prefer", "note, desc"], "no column 'note' in the input; columns present: "),
        (["--prefer", "note, desc"], " (in --prefer, write `note, desc`)"),
        (["--set", "boilerplate.group_col=no.such", "--strip-boilerplate"], "'no.such'"),
    ],
    ids=["missing", "unclosed", "unquoted-comma", "quoting-hint", "missing-group"],
)
def test_user_errors_under_odd_names_are_one_line(inputs, cli, tmp_path, capfd, args, message):
    argv = ["dedupe", str(inputs["paths"]["odd", "parquet"]), str(tmp_path / "out")]
    assert cli([*argv, *columns("odd"), *args]) == 2
    err = capfd.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], err
    assert "Traceback" not in err and "\tat " not in err


def test_a_backticked_id_column_is_named_as_given(inputs, cli, tmp_path, capfd):
    """Names are not Spark expressions: ``--id-col '`doc.id`'`` names a column that does not
    exist, and the message says how to name the one that does."""
    argv = ["dedupe", str(inputs["paths"]["odd", "parquet"]), str(tmp_path / "out")]
    assert cli([*argv, "--id-col", f"`{ID}`", "--text-col", TEXT]) == 2
    err = capfd.readouterr().err
    assert f"the id column '`{ID}`' is not in the input" in err
    assert f"(names are taken as they are, without backticks: --id-col {ID})." in err


def test_a_name_yaml_reads_as_a_number_is_refused(inputs, cli, tmp_path, capfd):
    config = tmp_path / "columns.yaml"
    config.write_text("id_col: 2026\ntext_col: body text\n")
    argv = ["dedupe", str(inputs["paths"]["odd", "parquet"]), str(tmp_path / "out")]
    assert cli([*argv, "--config", str(config)]) == 2
    assert "error: id_col must be a column name, got 2026; " in capfd.readouterr().err


@pytest.mark.slow
def test_a_missing_odd_column_in_a_process_of_its_own(inputs, tmp_path):
    """The command line in its own process (its own JVM): exit 2, one line, no Java trace."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    corpus, out = str(inputs["paths"]["odd", "json"]), str(tmp_path / "out")
    argv = ["dedupe", corpus, out, *columns("odd"), "--prefer", "a[1] desc", "--master", "local[2]"]
    done = subprocess.run(
        [sys.executable, "-m", "neardup_spark", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "error: --prefer: no column 'a[1]' in the input" in done.stderr
    assert "Traceback" not in done.stderr and "at org.apache" not in done.stderr
