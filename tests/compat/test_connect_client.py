"""``make test-compat``'s Connect row: the job from a client that has no JVM.

A Spark Connect server runs in one process (this venv's pyspark 4.x, with the package for its
Python workers); ``neardup`` runs from another venv, ``NEARDUP_CONNECT_CLIENT`` (its ``bin``),
that holds ``pyspark-client`` and the package's core only, with no Java on its ``PATH``. For each
method, a nightly day 1 + day 2, ``--strip-boilerplate`` and ``--prefer``, its clusters and pairs
must equal those of the same command run classic here (in this process, on the suite's
session); exit codes 0, 1 and 2 and their ``error:`` lines must be the same. Skipped unless
``NEARDUP_CONNECT_CLIENT`` is set (the Makefile sets it for this row).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.bench.connect_server import connect_server
from neardup_spark.quality.generate import generate_corpus
from tests.spark_state import cli_on_session

CLIENT_ENV = "NEARDUP_CONNECT_CLIENT"
REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    not os.environ.get(CLIENT_ENV), reason=f"{CLIENT_ENV} is unset (make test-compat sets it)"
)


def client_env() -> dict[str, str]:
    """The client's environment: its venv first on PATH, no Java anywhere on it."""
    client_bin = os.environ[CLIENT_ENV]
    path = [client_bin] + [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and not os.path.exists(os.path.join(p, "java"))
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_REMOTE")}
    env.pop("PYSPARK_PYTHON", None)
    env["PATH"] = os.pathsep.join(path)
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with connect_server(tmp_path_factory.mktemp("server"), python=sys.executable) as running:
        yield running


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    table, _ = generate_corpus(400, seed=5, mean_words=70)
    table = table.append_column(
        "quality", pa.array([(i * 13) % 7 for i in range(table.num_rows)], pa.int64())
    )
    for name, part in (("all", table), ("day1", table.slice(0, 220)), ("day2", table.slice(220))):
        (root / name).mkdir()
        pq.write_table(part, root / name / "part-0.parquet")
    return root


@pytest.fixture
def classic(spark, capfd):
    """``neardup ARGS`` classic, in this process on the suite's session: its exit code and
    stderr, as a finished process gives them."""
    with cli_on_session(spark) as neardup:

        def run(*args: str) -> SimpleNamespace:
            capfd.readouterr()
            code = neardup(args)
            return SimpleNamespace(returncode=code, stderr=capfd.readouterr().err)

        yield run


def connect(server, *args: str) -> subprocess.CompletedProcess[str]:
    neardup = os.path.join(os.environ[CLIENT_ENV], "neardup")
    return subprocess.run(
        [neardup, *args, "--remote", server.url],
        capture_output=True,
        text=True,
        timeout=600,
        env=client_env(),
        cwd=REPO,
    )


def table_rows(path: Path) -> list[tuple]:
    return sorted(tuple(sorted(r.items())) for r in pq.read_table(path).to_pylist())


def errors(done: subprocess.CompletedProcess[str], root: Path) -> list[str]:
    """The ``error:`` lines, the run's own directory and the index's random segment names made
    alike."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    return [
        re.sub(r"\b(s\d{6})-[0-9a-f]{8}\b", r"\1-X", line.replace(str(root), "ROOT"))
        for line in lines
    ]


def test_the_client_has_no_jvm():
    env = client_env()
    python = os.path.join(os.environ[CLIENT_ENV], "python")
    assert shutil.which("java", path=env["PATH"]) is None
    probe = "import importlib.util as u; print(u.find_spec('py4j'), u.find_spec('pyspark.core'))"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["None", "None"], done.stderr
    version = subprocess.run([python, "-m", "pip", "show", "pyspark-client"], capture_output=True)
    assert version.returncode == 0


@pytest.mark.parametrize(
    "options",
    [
        ("--method", "minhash"),
        ("--method", "simhash"),
        ("--method", "exact"),
        ("--strip-boilerplate", "--prefer", "quality desc"),
    ],
    ids=["minhash", "simhash", "exact", "strip-boilerplate-prefer"],
)
def test_dedupe_from_a_connect_client_equals_classic(server, data, classic, tmp_path, options):
    runs = {
        "classic": classic("dedupe", str(data / "all"), str(tmp_path / "classic"), *options),
        "connect": connect(
            server, "dedupe", str(data / "all"), str(tmp_path / "connect"), *options
        ),
    }
    for kind, done in runs.items():
        assert done.returncode == 0, f"{kind}: {done.stderr[-3000:]}"
    for table in ("clusters", "pairs", "deduplicated"):
        assert table_rows(tmp_path / "classic" / table) == table_rows(
            tmp_path / "connect" / table
        ), table


def test_nights_from_a_connect_client_equal_classic(server, data, classic, tmp_path):
    for kind, runner in (("classic", classic), ("connect", lambda *a: connect(server, *a))):
        for day in ("day1", "day2"):
            out = tmp_path / f"{kind}-{day}"
            done = runner("dedupe", str(data / day), str(out), "--index", str(tmp_path / kind))
            assert done.returncode == 0, f"{kind} {day}: {done.stderr[-3000:]}"
    for day in ("day1", "day2"):
        for table in ("clusters", "pairs", "changed_clusters"):
            assert table_rows(tmp_path / f"classic-{day}" / table) == table_rows(
                tmp_path / f"connect-{day}" / table
            ), (day, table)


def test_exit_codes_and_messages_equal_classic(server, data, classic, tmp_path):
    """0 (a run), 2 (a missing column), 1 (a night on a damaged index): same codes and lines."""
    for kind in ("classic", "connect"):
        root = tmp_path / kind
        root.mkdir()

        def run(*args: str, kind: str = kind) -> subprocess.CompletedProcess[str] | SimpleNamespace:
            return classic(*args) if kind == "classic" else connect(server, *args)

        missing = run("dedupe", str(data / "all"), str(root / "o"), "--id-col", "url")
        index = root / "index"
        first = run("dedupe", str(data / "day1"), str(root / "d1"), "--index", str(index))
        keys = next(index.rglob("*.keys.arrow"))
        with open(keys, "r+b") as handle:  # overwrite its middle, as a bad disk would
            handle.seek(max(0, keys.stat().st_size // 2))
            handle.write(b"\0" * 64)
        damaged = run("dedupe", str(data / "day2"), str(root / "d2"), "--index", str(index))
        results = [(d.returncode, errors(d, root)) for d in (missing, first, damaged)]
        if kind == "classic":
            expected = results
            assert [code for code, _ in results] == [2, 0, 1]
        else:
            assert results == expected
