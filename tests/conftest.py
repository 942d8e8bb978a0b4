"""One SparkSession for the whole suite: local[2], small shuffles, real Arrow and Parquet."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neardup_spark.runtime.jvm_archive import ARCHIVE_ENV, archive_path, java_options
from neardup_spark.runtime.session import PARQUET_TIMESTAMP_TYPE
from tests.spark_state import session_settings

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every JVM the tests start through spark-submit (spark-submit of a job, pyspark's own sessions,
# a Connect server) and a standalone cluster's daemons: the quick JIT alone, as the CLI's local
# mode sets for itself (runtime/session.py). The optimising compiler spent ~7 CPU-seconds of a
# 4-document spark-submit run (24 -> 17 CPU-s), and the suite is CPU-bound on 2 cores.
# With them, the JVM class archive `make setup` built (runtime/jvm_archive.py), where it exists:
# the classes of Spark's jars pre-parsed, as the CLI's local sessions map it (~4 CPU-seconds of
# each JVM's start). A test of the product's own mapping of it sets these variables itself.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
SUITE_JVM_OPTIONS = f"{QUICK_JIT} {java_options()}".strip()
for _variable in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_variable, SUITE_JVM_OPTIONS)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("neardup-tests")
        .config("spark.driver.memory", "2g")
        # One partition per core (Spark's own default parallelism for local[2]); the CLI's local
        # mode takes two a core (session.py). The suite's data are small: each partition is
        # tasks' fixed costs, not work (2 instead of 4: the shared-session tests' CPU 17% less,
        # the suite 10.6% faster). Every shuffle still has two partitions; the tests of
        # partitioning set their own counts.
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.adaptive.enabled", "false")  # as in local mode (session.py)
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        # Loopback only, as the CLI's local mode (session.py, LOCAL_DEFAULTS)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        # Many small queries: the quick JIT alone, as the CLI's local mode (session.py).
        # The whole suite's queries in one JVM: with the quick JIT alone the code cache defaults
        # to 48 MB (240 MB otherwise), and it filled up in a full run ("Out of space in
        # CodeCache for adapters": the nightly history fixture failed, and 24 tests with it).
        # The JVM class archive when `make setup` built it, as a CLI run maps it.
        .config(
            "spark.driver.extraJavaOptions",
            f"-XX:ReservedCodeCacheSize=256m {SUITE_JVM_OPTIONS}",
        )
        .config("spark.python.daemon.module", "neardup_spark.runtime.worker_daemon")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.setCheckpointDir(str(tmp_path_factory.mktemp("checkpoints")))
    yield session
    session.stop()


# Settings the product itself puts on a session it is handed, on purpose (the Python API's
# path: session.py's keep_column_types). Unset after each test, so that every test exercises the
# product's own setting of them, whatever ran before.
PRODUCT_SET = (PARQUET_TIMESTAMP_TYPE[0],)
# This thread's properties a test may set through SparkContext (setJobDescription, setJobGroup).
LOCAL_PROPERTIES = ("spark.job.description", "spark.jobGroup.id", "spark.job.interruptOnCancel")


def session_state(session) -> dict[str, object]:
    """What a test could leave behind on the shared session: its settings, its temporary views,
    and this thread's job description, group and tags. A few cheap JVM calls (~2 ms): the
    settings and the tags each read as one string (PySpark's ``conf.getAll`` and
    ``getJobTags`` took ~20 ms each, one py4j round trip per entry, before and after each of
    ~700 tests)."""
    jsession = session._jsparkSession
    context = session.sparkContext
    views = jsession.sessionState().catalog().listLocalTempViews("*").mkString("\n")
    tags = context._jsc.sc().getJobTags().mkString("\n")  # this thread's, as getJobTags
    return {
        "settings": jsession.conf().getAll().toString(),
        "temporary views": sorted(view.strip("`") for view in views.split("\n") if view),
        **{key: context.getLocalProperty(key) for key in LOCAL_PROPERTIES},
        "job tags": sorted(tag for tag in tags.split("\n") if tag),
    }


# The settings as a dict, by their one-string form: a test that leaves the session as it found
# it (nearly all) finds the same string, so the ~20 ms dict is read once per distinct state.
_SETTINGS_BY_TEXT: dict[str, dict[str, str]] = {}


def settings_before(session, text: str) -> dict[str, str]:
    if text not in _SETTINGS_BY_TEXT:
        _SETTINGS_BY_TEXT[text] = session_settings(session)
    return _SETTINGS_BY_TEXT[text]


@pytest.fixture(autouse=True)
def leaves_the_session_as_it_found_it(request):
    """Fail a test that leaves state on the suite's one SparkSession (a setting changed or not
    restored, a temporary view, a job description or group, a job tag): the tests after it
    would run on another session than they expect. The state is put back, so that one leak
    fails one test."""
    if "spark" not in request.fixturenames:
        yield
        return
    session = request.getfixturevalue("spark")
    context = session.sparkContext
    before = session_state(session)
    settings = settings_before(session, before["settings"])  # type: ignore[arg-type]
    yield
    for key in PRODUCT_SET:
        if key not in settings:
            session.conf.unset(key)
    after = session_state(session)
    if after == before:
        return
    now = session_settings(session)
    changed = {
        key: (settings.get(key), now.get(key))
        for key in sorted(settings.keys() | now.keys())
        if settings.get(key) != now.get(key)
    }
    conf = session._jsparkSession.sessionState().conf()  # Spark core settings too
    for key, (was, _) in changed.items():
        if was is None:
            conf.unsetConf(key)
        else:
            conf.setConfString(key, was)
    for view in set(after["temporary views"]) - set(before["temporary views"]):
        session.catalog.dropTempView(view)
    for key in LOCAL_PROPERTIES:
        context.setLocalProperty(key, before[key])  # type: ignore[arg-type]
    for tag in set(after["job tags"]) - set(before["job tags"]):
        context.removeJobTag(tag)
    leaks = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
    leaks["settings"] = changed
    pytest.fail(f"the test left state on the shared SparkSession (before, after): {leaks}")


# The JVM class archive (runtime/jvm_archive.py) for the JVMs the tests start (`neardup` in a
# subprocess, spark-submit in local mode): the one `make setup` built (`neardup jvm-archive`, in
# its default place), or else built once per run by the product's own `neardup jvm-archive`,
# in the background from the end of collection, and named to every process by
# NEARDUP_SPARK_JVM_ARCHIVE. A local session maps it once it exists (the build renames it into
# place only when complete), as after `neardup jvm-archive` on a user's machine; until then, and
# in tests that set the variable themselves, JVMs start without it. Under pytest-xdist the first
# worker builds it for all.
_ARCHIVE_BUILD: dict[str, object] = {}
NEARDUP = (sys.executable, "-m", "neardup_spark")


def _shared_dir(config) -> Path:
    """A directory all of this run's pytest processes share (xdist workers included)."""
    basetemp = config._tmp_path_factory.getbasetemp()
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp


def pytest_collection_finish(session) -> None:
    if os.environ.get(ARCHIVE_ENV) or not any(
        item.get_closest_marker("slow") for item in session.items
    ):
        return  # the variable already chosen (e.g. off), or no test that starts a JVM
    installed = archive_path()
    if installed is not None and installed.is_file():  # `make setup` built it (neardup jvm-archive)
        _ARCHIVE_BUILD.update(path=installed, installed=True)
        return
    directory = _shared_dir(session.config) / "jvm-archive"
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / "classes.jsa"
    _ARCHIVE_BUILD["path"] = archive
    os.environ[ARCHIVE_ENV] = str(archive)
    try:
        (directory / "building").touch(exist_ok=False)  # one builder per run
    except FileExistsError:
        return
    # The build's exit code lands in a file, for whichever process waits for it.
    script = "import subprocess, sys; code = subprocess.run(sys.argv[2:]).returncode\n"
    script += "open(sys.argv[1], 'w').write(str(code))"
    with open(directory / "build.log", "wb") as log:
        _ARCHIVE_BUILD["process"] = subprocess.Popen(
            [sys.executable, "-c", script, str(directory / "exit"), *NEARDUP, "jvm-archive"],
            cwd=ROOT,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def pytest_sessionfinish(session) -> None:
    process = _ARCHIVE_BUILD.get("process")
    if isinstance(process, subprocess.Popen) and process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)  # a short run ended before the build did
        process.wait(timeout=60)


@pytest.fixture(scope="session")
def built_jvm_archive(tmp_path_factory) -> Path:
    """The run's JVM class archive, built by ``neardup jvm-archive``: waits for the background
    build (or builds one here when NEARDUP_SPARK_JVM_ARCHIVE was set before the run); fails if
    the build did."""
    archive = _ARCHIVE_BUILD.get("path")
    if not isinstance(archive, Path):
        archive = tmp_path_factory.mktemp("jvm-archive") / "classes.jsa"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, ARCHIVE_ENV: str(archive)}
        built = subprocess.run(
            [*NEARDUP, "jvm-archive"], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert built.returncode == 0, built.stderr[-3000:]
        return archive
    if _ARCHIVE_BUILD.get("installed"):  # make setup's
        assert archive.is_file(), archive
        return archive
    done = archive.parent / "exit"
    deadline = time.monotonic() + 900
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    log = (archive.parent / "build.log").read_text(errors="replace")
    assert done.exists() and done.read_text() == "0", log[-3000:]
    return archive


def group_of(item) -> str:
    """The tests that share a module's fixtures (a module), or tests/nightly's package-scoped
    history fixture (the package)."""
    path = item.nodeid.split("::")[0]
    return "tests/nightly" if path.startswith("tests/nightly/") else path


def waits_for_the_archive(item) -> bool:
    return "built_jvm_archive" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items) -> None:
    """The tests that need the built JVM class archive run last (by then its background build
    is done, instead of a test waiting for it). Under pytest-xdist (``make test``: -n 2 --dist
    loadgroup --no-loadscope-reorder): each group of :func:`group_of` runs in one worker, so
    that its fixtures are made once; the groups that start JVMs of their own (slow tests, ~30 s
    each) go first, heaviest first, so that a long one does not come last to one worker while
    the other idles."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=waits_for_the_archive)  # stable: else as collected
        return
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(group_of(item), []).append(item)

    def weight(members: list) -> int:
        if any(waits_for_the_archive(item) for item in members):
            return 1  # last
        slow = sum(1 for item in members if item.get_closest_marker("slow"))
        return -(30 * slow + len(members)) if slow else 0

    order = sorted(groups, key=lambda group: weight(groups[group]))  # stable: else as collected
    items[:] = [item for group in order for item in groups[group]]
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
