"""The job over Spark Connect: a real Connect server in a process of its own (a local classic
session with Spark's Connect plugin), ``neardup ... --remote sc://...`` in another, against the
same commands run classic in this process on the suite's session. Clusters, pairs and
deduplicated rows, exit codes and ``error:`` lines must be the same. ``make test-compat``
repeats this from a venv holding ``pyspark-client`` and no Java."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.bench.connect_server import connect_server
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.runtime.faults import SLOW_BATCH_ENV
from tests.odd_columns import ID as ODD_ID
from tests.odd_columns import PREFER as ODD_PREFER
from tests.odd_columns import SITE as ODD_SITE
from tests.odd_columns import TEXT as ODD_TEXT
from tests.odd_columns import odd_table, write_corpus
from tests.plans import ran
from tests.spark_state import cli_on_session

REPO = Path(__file__).resolve().parents[2]
NEARDUP = (sys.executable, "-m", "neardup_spark")
pytestmark = pytest.mark.slow
# The per-document pass read by Spark (the server's tasks over Connect).
SPARK_READ = ("--set", "plan.sketch=spark")
# Every step of a run as Spark tasks and stages: the pass, the pairs, the components.
SPARK_STAGES = (*SPARK_READ, "--set", "plan.pairs=spark")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module; its workers slow down only once ``slow_dir(server)`` exists
    (the signal test)."""
    work = tmp_path_factory.mktemp("connect")
    armed = {SLOW_BATCH_ENV: str(work / "slow" / "marker")}
    # One shuffle partition per core, as the suite's own session (tests/conftest.py)
    settings = {
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        "spark.sql.shuffle.partitions": "2",
    }
    with connect_server(work, extra_env=armed, spark=settings) as running:
        running.slow_marker = work / "slow" / "marker"  # type: ignore[attr-defined]
        running.warehouse = work / "warehouse"  # type: ignore[attr-defined]
        yield running


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """600 documents with planted near-duplicates, a quality column for --prefer."""
    table, _ = generate_corpus(600, seed=7, mean_words=80)
    quality = pa.array([(i * 37) % 11 for i in range(table.num_rows)], pa.int64())
    path = tmp_path_factory.mktemp("corpus") / "corpus"
    path.mkdir()
    pq.write_table(table.append_column("quality", quality), path / "part-0.parquet")
    return path


@pytest.fixture(scope="module")
def classic_default(spark, corpus, tmp_path_factory):
    """The corpus deduped classic with the default method (minhash), once for the module."""
    out = tmp_path_factory.mktemp("classic") / "default"
    with cli_on_session(spark) as run:
        assert run(["dedupe", str(corpus), str(out), "--no-report"]) == 0
    return out


@pytest.fixture
def cli(spark):
    """``neardup ...`` classic, in this process, on the suite's session."""
    with cli_on_session(spark) as run:
        yield run


def remote(server, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``neardup ARGS --remote URL`` in a process of its own (a Connect client: no JVM)."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    return subprocess.run(
        [*NEARDUP, *args, "--remote", server.url],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
    )


def rows(path: Path, table: str) -> list[tuple]:
    """A table of a run's OUTPUT as sorted tuples."""
    data = pq.read_table(path / table).to_pylist()
    return sorted(tuple(sorted(row.items())) for row in data)


def assert_same_outputs(classic: Path, connect: Path, tables=("clusters", "pairs")) -> None:
    for table in tables:
        assert rows(classic, table) == rows(connect, table), table


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize(
    ("options", "plan"),
    [
        pytest.param(
            ("--method", "minhash", *SPARK_STAGES),
            {"sketch": "spark", "pairs": "spark"},
            id="minhash-spark",
        ),
        pytest.param(
            ("--method", "simhash", *SPARK_STAGES),
            {"sketch": "spark", "pairs": "spark"},
            id="simhash-spark",
            marks=pytest.mark.extended,
        ),
        pytest.param(
            ("--similarity", "containment", *SPARK_STAGES),
            {"sketch": "spark", "pairs": "spark"},
            id="containment-spark",
            marks=pytest.mark.extended,
        ),
        pytest.param(
            ("--strip-boilerplate", "--prefer", "quality desc"),
            {"sketch": "spark"},
            id="strip-prefer",
            marks=pytest.mark.extended,  # (boilerplate over Connect: the odd names' test too)
        ),
    ],
)
def test_dedupe_over_connect_gives_the_classic_outputs(
    server, corpus, cli, tmp_path, capsys, options, plan
):
    """The MinHash and SimHash runs take the Spark path on both sides (the pass in the
    server's tasks, pairs as Spark stages), so Connect's stages are compared with classic's;
    boilerplate stripping runs its cleaning pass as Spark tasks whatever the plan."""
    classic, connect = tmp_path / "classic", tmp_path / "connect"
    assert cli(["dedupe", str(corpus), str(classic), *options, "--no-report"]) == 0
    capsys.readouterr()
    done = remote(server, "dedupe", str(corpus), str(connect), *options, "--no-report")
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_outputs(classic, connect, ("clusters", "pairs", "deduplicated"))
    text = (connect / "report.json").read_text()
    assert '"session": "connect"' in text
    for side in (json.loads(text), json.loads((classic / "report.json").read_text())):
        ran(side, **plan)
    if "--strip-boilerplate" in options:
        assert '"top_units"' in text


def test_the_driver_path_over_connect_gives_the_classic_outputs(
    server, corpus, classic_default, tmp_path
):
    """A local server at a loopback address: its client does the per-document pass and finds
    the pairs as a classic driver does (the default plan of a small run)."""
    connect = tmp_path / "connect"
    done = remote(server, "dedupe", str(corpus), str(connect), "--no-report")
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_outputs(classic_default, connect, ("clusters", "pairs", "deduplicated"))
    for side in (connect, classic_default):
        ran(json.loads((side / "report.json").read_text()), sketch="driver", pairs="driver")


def test_output_tables_over_connect(server, corpus, classic_default, tmp_path):
    """``--output-table``: the server's catalog gets the three tables (here Parquet tables in
    its warehouse), holding the rows of the classic run's Parquet outputs; a second run is
    refused without --overwrite."""
    classic = classic_default
    done = remote(server, "dedupe", str(corpus), "--output-table", "crawl")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tables            crawl_clusters, crawl_pairs, crawl_deduplicated" in done.stdout
    for table in ("clusters", "pairs", "deduplicated"):
        assert rows(server.warehouse, f"crawl_{table}") == rows(classic, table), table
    # Tables in: the deduplicated table read back as a corpus over Connect (it carries the first
    # run's duplicates column: this run's count takes another name).
    again_count = ["--set", "duplicates_column=duplicates_again"]
    back = remote(
        server,
        "dedupe",
        "--input-table",
        "crawl_deduplicated",
        str(tmp_path / "back"),
        *again_count,
    )
    assert back.returncode == 0, back.stderr[-3000:]
    report = json.loads((tmp_path / "back" / "report.json").read_text())
    assert report["input"] == "table crawl_deduplicated"
    assert report["counts"]["input_rows"] == len(rows(classic, "deduplicated"))
    again = remote(server, "dedupe", str(corpus), "--output-table", "crawl")
    assert again.returncode == 2
    assert error_lines(again.stderr) == [
        "error: table crawl_clusters exists; pass --overwrite to replace the tables of "
        "--output-table crawl"
    ]


def test_a_night_over_connect_gives_the_classic_index(server, cli, tmp_path, capsys):
    """Day 1 then day 2 into an index: over Connect, the same outputs and index contents. Day 2
    takes the Spark path, whose per-document pass leaves the batch's texts in a stash that the
    server's tasks write and the client lists."""
    table, _ = generate_corpus(500, seed=11, mean_words=80)
    days = {}
    for day, part in (("day1", table.slice(0, 260)), ("day2", table.slice(260))):
        days[day] = tmp_path / day
        days[day].mkdir()
        pq.write_table(part, days[day] / "part-0.parquet")
    for kind in ("classic", "connect"):
        index = tmp_path / f"index-{kind}"
        for day, path in days.items():
            out = tmp_path / f"{kind}-{day}"
            args = ["dedupe", str(path), str(out), "--index", str(index)]
            if day == "day2":
                args += [*SPARK_READ, "--set", "plan.night=spark"]
            if kind == "classic":
                assert cli(args) == 0, capsys.readouterr().err
            else:
                done = remote(server, *args)
                assert done.returncode == 0, done.stderr[-3000:]
    for day in days:
        assert_same_outputs(
            tmp_path / f"classic-{day}",
            tmp_path / f"connect-{day}",
            ("clusters", "pairs", "changed_clusters", "deduplicated"),
        )
        for kind in ("classic", "connect"):
            report = json.loads((tmp_path / f"{kind}-{day}" / "report.json").read_text())
            where = "spark" if day == "day2" else "driver"
            ran(report, sketch=where, night=where)


@pytest.mark.extended
def test_a_match_over_connect_gives_the_classic_outputs(server, cli, tmp_path, capsys):
    """neardup match of day 2 against day 1's index: over Connect, the same matches and
    deduplicated rows, the index untouched."""
    table, _ = generate_corpus(500, seed=11, mean_words=80)
    days = {}
    for day, part in (("day1", table.slice(0, 260)), ("day2", table.slice(260))):
        days[day] = tmp_path / day
        days[day].mkdir()
        pq.write_table(part, days[day] / "part-0.parquet")
    index = tmp_path / "index"
    assert cli(["dedupe", str(days["day1"]), str(tmp_path / "out1"), "--index", str(index)]) == 0
    manifest = (index / "CURRENT").read_text()
    args = ["match", str(days["day2"])]
    assert cli([*args, str(tmp_path / "classic"), "--index", str(index)]) == 0
    capsys.readouterr()
    done = remote(server, *args, str(tmp_path / "connect"), "--index", str(index))
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_outputs(tmp_path / "classic", tmp_path / "connect", ("matches", "deduplicated"))
    assert rows(tmp_path / "classic", "matches")  # something to compare
    assert (index / "CURRENT").read_text() == manifest


@pytest.mark.extended
def test_boilerplate_ingest_and_index_commands_over_connect(server, cli, tmp_path, capsys):
    """``neardup boilerplate`` and ``neardup ingest`` write the classic run's rows;
    ``neardup index info|verify|compact`` work on an index built over Connect."""
    from tests.ingest.conftest import html_response, page, write_warc

    lines = [f"shared footer line number {i} of the site" for i in range(3)]
    texts = [f"body {i} about rivers and bridges\n" + "\n".join(lines) for i in range(40)]
    corpus = tmp_path / "pages"
    corpus.mkdir()
    pq.write_table(
        pa.table({"id": [f"p{i}" for i in range(40)], "text": texts}), corpus / "p.parquet"
    )
    warcs = tmp_path / "warcs"
    records = [html_response(f"r{i}", page(f"page {i} about rivers").encode()) for i in range(6)]
    write_warc(warcs / "a.warc.gz", records, compress=True)
    for kind in ("classic", "connect"):
        commands = [
            ["boilerplate", str(corpus), str(tmp_path / f"bp-{kind}")],
            ["ingest", str(warcs), str(tmp_path / f"ing-{kind}")],
        ]
        for args in commands:
            if kind == "classic":
                assert cli(args) == 0, capsys.readouterr().err
            else:
                done = remote(server, *args)
                assert done.returncode == 0, done.stderr[-3000:]
    for name in ("bp", "ing"):
        classic = pq.read_table(tmp_path / f"{name}-classic").to_pylist()
        connect = pq.read_table(tmp_path / f"{name}-connect").to_pylist()
        key = "id"
        assert sorted(connect, key=lambda r: r[key]) == sorted(classic, key=lambda r: r[key])
    report = (tmp_path / "bp-connect" / "_report.json").read_text()
    assert "shared footer line number 0 of the site" in report  # the top units' examples
    index = tmp_path / "index"
    done = remote(server, "dedupe", str(corpus), str(tmp_path / "night"), "--index", str(index))
    assert done.returncode == 0, done.stderr[-3000:]
    for args in (["info", str(index)], ["verify", str(index)], ["compact", str(index)]):
        done = remote(server, "index", *args)
        assert done.returncode == 0, (args, done.stderr[-3000:])
    assert "documents         40 in" in remote(server, "index", "info", str(index)).stdout


def test_user_errors_over_connect_are_the_classic_ones(server, corpus, cli, tmp_path, capsys):
    """A missing column (Connect analyses lazily: still exit 2 before any job), a setting
    that belongs to the server, a server that is not there (exit 3: fix the machine)."""
    args = ["dedupe", str(corpus), str(tmp_path / "o1"), "--text-col", "body"]
    assert cli(args) == 2
    classic = error_lines(capsys.readouterr().err)
    done = remote(server, *args)
    assert (done.returncode, error_lines(done.stderr)) == (2, classic)
    others = [line for line in done.stderr.splitlines() if "neardup_spark.progress" not in line]
    assert len(others) == 1, done.stderr  # no client log, no server stack trace

    static = remote(
        server, "dedupe", str(corpus), str(tmp_path / "o2"), "--set", "spark.driver.memory=4g"
    )
    assert static.returncode == 2
    assert (
        error_lines(static.stderr)
        == [
            line
            for line in error_lines(static.stderr)
            if "spark.driver.memory cannot be set" in line
        ]
        != []
    )

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens once it is closed
    gone = subprocess.run(
        [
            *NEARDUP,
            "dedupe",
            str(corpus),
            str(tmp_path / "o3"),
            "--remote",
            f"sc://127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert gone.returncode == 3
    assert error_lines(gone.stderr) == [
        f"error: cannot reach the Spark Connect server at sc://127.0.0.1:{port} "
        "(Connection refused); is it running?"
    ]


@pytest.mark.extended  # (odd names: tests/cli/test_odd_column_names.py, classic)
def test_odd_column_names_over_connect(server, cli, tmp_path, capsys):
    """Column names Spark would parse (tests/odd_columns.py) as the id, text, --prefer and
    group columns, boilerplate stripped and the per-document pass in the server's tasks: the
    classic run's outputs, deduplicated/ under the input's own names; a missing one is one
    line, as classic."""
    table = odd_table()
    corpus = write_corpus(table, tmp_path / "odd")
    options = ["--id-col", ODD_ID, "--text-col", ODD_TEXT, "--prefer", ODD_PREFER["odd"]]
    options += ["--strip-boilerplate", *SPARK_READ, "--no-report"]
    options += ["--set", f"boilerplate.group_col={ODD_SITE}", "--set", "boilerplate.min_docs=3"]
    classic, connect = tmp_path / "classic", tmp_path / "connect"
    assert cli(["dedupe", str(corpus), str(classic), *options]) == 0
    done = remote(server, "dedupe", str(corpus), str(connect), *options)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_outputs(classic, connect, ("clusters", "pairs", "deduplicated"))
    assert pq.read_schema(next((connect / "deduplicated").glob("*.parquet"))).names == [
        *table.column_names,
        "duplicates",
    ]
    missing = ["dedupe", str(corpus), str(tmp_path / "out"), *options, "--prefer", "a[1]"]
    capsys.readouterr()
    assert cli(missing) == 2
    classic_errors = error_lines(capsys.readouterr().err)
    done = remote(server, *missing)
    assert (done.returncode, error_lines(done.stderr)) == (2, classic_errors)


def test_sigint_interrupts_the_servers_operations_and_the_server_goes_on(server, tmp_path):
    """Ctrl-C of a client: its operations on the server are interrupted by their tag, it exits
    130 with one line, and the server serves the next run."""
    table, _ = generate_corpus(300, seed=3, mean_words=60)
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(table, data / "part-0.parquet")
    marker = server.slow_marker
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    marker.parent.mkdir()  # the server's per-document batches now sleep
    try:
        proc = subprocess.Popen(
            # Spark tasks for the per-document pass: the server's batches are the slow ones
            [
                *NEARDUP,
                "dedupe",
                str(data),
                str(tmp_path / "out"),
                "--remote",
                server.url,
                *SPARK_READ,
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 180
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists() and proc.poll() is None
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        marker.unlink(missing_ok=True)
        marker.parent.rmdir()
    assert proc.returncode == 130, stderr
    assert took <= 10, f"{took:.1f} s"
    lines = [line for line in stderr.splitlines() if "neardup_spark.progress" not in line]
    assert len(lines) == 1 and lines[0].startswith("interrupted by SIGINT: "), stderr
    again = remote(server, "dedupe", str(data), str(tmp_path / "out"), "--no-report")
    assert again.returncode == 0, again.stderr[-3000:]
