"""A run that cannot start Spark ends in one ``error:`` line with a distinct exit code, never
a traceback, a Java stack trace or the retryable exit 1: exit 3 "fix the machine" (no Java, the
wrong Java, JAVA_HOME pointing nowhere, a port that cannot be bound, a master or Spark Connect
server that does not answer), exit 2 "fix the command" (a bad size, a setting Spark refuses).

Real processes, each in an environment of its own (PATH without java, a fake old ``java``).
Most fail before any JVM is launched (runtime/preflight.py); the few a JVM must reject launch
one and fail at its start (runtime/start_failure.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
NEARDUP = (sys.executable, "-m", "neardup_spark")
# What must not reach the console for a user or machine error.
NOT_SHOWN = ("Traceback", "py4j", "JAVA_GATEWAY_EXITED", "at org.apache", "Exception in thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("start") / "corpus"
    directory.mkdir()
    table = pa.table({"id": [1, 2, 3], "text": ["a b c d e", "a b c d e", "x y z w v"]})
    pq.write_table(table, directory / "part-0.parquet")
    return directory


def run(
    *args: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``neardup ARGS`` (or ``python ARGS[0] ...`` for a ``jobs/`` script) in a process of its
    own, with ``env`` over this one's and the ``unset`` variables removed."""
    environ = {k: v for k, v in os.environ.items() if k not in unset and k != "SPARK_REMOTE"}
    environ.update(env or {})
    environ.setdefault("PYSPARK_PYTHON", sys.executable)
    command = [sys.executable, *args] if args[0].endswith(".py") else [*NEARDUP, *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=REPO, env=environ
    )


def the_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The one ``error:`` line of a run that ended with ``code``; besides it, stderr holds only
    progress lines, and neither stream a stack trace."""
    assert done.returncode == code, done.stderr[-3000:]
    for shown in NOT_SHOWN:
        assert shown not in done.stdout + done.stderr, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    others = [line for line in lines if not line.startswith("error: ") and "stage=" not in line]
    assert len(errors) == 1 and not others, done.stderr[-3000:]
    return errors[0]


def no_java_path(tmp_path: Path) -> str:
    """A PATH that holds no ``java``."""
    empty = tmp_path / "bin-without-java"
    empty.mkdir(exist_ok=True)
    return str(empty)


def old_java(tmp_path: Path, version: str = "11.0.2") -> Path:
    """A Java installation whose ``java -version`` says ``version`` (and runs nothing)."""
    home = tmp_path / f"jdk-{version}"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2019-01-15' >&2\n")
    java.chmod(0o755)
    return home


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once it is closed


def test_no_java_is_exit_3_in_every_command_that_starts_spark(corpus, tmp_path):
    """Dedupe, a nightly run, boilerplate, ingest, index compaction, the class archive, the
    bench and the spark-submit entry points: the same line, before any work."""
    (tmp_path / "a.warc.gz").write_bytes(b"")
    out = str(tmp_path / "out")
    commands = [
        ("dedupe", str(corpus), out),
        ("dedupe", str(corpus), out, "--index", str(tmp_path / "index")),
        ("boilerplate", str(corpus), out),
        ("ingest", str(tmp_path / "a.warc.gz"), out),
        ("index", "compact", str(tmp_path / "index")),
        ("jvm-archive", "--force"),
        ("bench", "--docs", "100", "--rows", "floor", "--workdir", str(tmp_path / "bench")),
        ("jobs/dedupe.py", str(corpus), out),
    ]
    env = {"PATH": no_java_path(tmp_path)}
    for command in commands:
        line = the_error(run(*command, env=env, unset=("JAVA_HOME",)), 3)
        assert line.startswith("error: no Java: JAVA_HOME is not set and no java is on PATH"), (
            command,
            line,
        )
    assert not (tmp_path / "out").exists() and not (tmp_path / "index").exists()


def test_java_home_pointing_nowhere_is_exit_3(corpus, tmp_path):
    done = run("dedupe", str(corpus), str(tmp_path / "out"), env={"JAVA_HOME": "/nonexistent"})
    assert "JAVA_HOME=/nonexistent holds no Java" in the_error(done, 3)


def test_a_java_too_old_for_spark_is_exit_3_naming_both(corpus, tmp_path):
    import pyspark

    need = "17" if pyspark.__version__.startswith("4") else "8"
    home = old_java(tmp_path, "11.0.2" if need == "17" else "1.7.0_80")
    by_home = run("dedupe", str(corpus), str(tmp_path / "out"), env={"JAVA_HOME": str(home)})
    line = the_error(by_home, 3)
    assert "is too old" in line and f"needs Java {need} or later" in line, line
    on_path = run(
        "dedupe",
        str(corpus),
        str(tmp_path / "out"),
        env={"PATH": f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}"},
        unset=("JAVA_HOME",),
    )
    assert "from PATH) is too old" in the_error(on_path, 3)


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("spark.driver.memory=abc", "spark.driver.memory=abc: not a size"),
        ("spark.driver.memory=2gb", "spark.driver.memory=2gb: the driver's JVM takes"),
        ("spark.executor.memory=1.5g", "spark.executor.memory=1.5g: fractional sizes"),
    ],
)
def test_a_bad_memory_size_is_exit_2_naming_the_key(corpus, tmp_path, setting, named):
    done = run("dedupe", str(corpus), str(tmp_path / "out"), "--set", setting)
    assert named in the_error(done, 2)


def test_a_master_or_connect_server_nobody_answers_is_exit_3_at_once(corpus, tmp_path):
    port = closed_port()
    out = str(tmp_path / "out")
    master = the_error(run("dedupe", str(corpus), out, "--master", f"spark://127.0.0.1:{port}"), 3)
    assert f"the Spark master at spark://127.0.0.1:{port} does not answer" in master
    remote = the_error(run("dedupe", str(corpus), out, "--remote", f"sc://127.0.0.1:{port}"), 3)
    assert f"cannot reach the Spark Connect server at sc://127.0.0.1:{port}" in remote
    by_env = run("dedupe", str(corpus), out, env={"SPARK_REMOTE": f"sc://127.0.0.1:{port}"})
    assert "cannot reach the Spark Connect server" in the_error(by_env, 3)
    unknown = the_error(run("dedupe", str(corpus), out, "--master", "foo://bar"), 2)
    assert "--master foo://bar: not a master Spark knows" in unknown


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "code", "named"),
    [
        (
            ["spark.sql.shuffle.partitions=abc"],
            2,
            "Spark refused the setting spark.sql.shuffle.partitions=abc: "
            "IllegalArgumentException: spark.sql.shuffle.partitions should be int, but was abc",
        ),
        (
            ["spark.serializer=org.example.NoSuchSerializer"],
            2,
            "Spark refused the setting spark.serializer=org.example.NoSuchSerializer: "
            "ClassNotFoundException",
        ),
        (["spark.driver.port=PORT"], 3, "Spark cannot bind sparkDriver to port PORT"),
        (
            ["spark.ui.enabled=true", "spark.ui.port=PORT"],
            3,
            "Spark cannot bind SparkUI to port PORT (Address already in use)",
        ),
    ],
    ids=["sql-setting", "serializer-class", "driver-port", "ui-port"],
)
def test_what_only_the_jvm_rejects_at_start_is_one_line(corpus, tmp_path, settings, code, named):
    """A JVM is launched and fails as it starts: a setting its context or SQL session refuses,
    a port already bound (no retries on the next ports). What it printed stays off the
    console; the line names the setting or the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        options = ["--set", "spark.port.maxRetries=0"]
        for setting in settings:
            options += ["--set", setting.replace("PORT", port)]
        done = run("dedupe", str(corpus), str(tmp_path / "out"), "--master", "local[1]", *options)
    assert named.replace("PORT", port) in the_error(done, code)
    assert not (tmp_path / "out" / "_SUCCESS").exists()
