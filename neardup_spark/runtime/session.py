"""Building the SparkSession for the command line and ``jobs/`` entry points: a classic one
(local mode, a cluster's master, spark-submit's) or a Spark Connect client (``--remote``)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import SparkSession

from neardup_spark.config import SessionSettings
from neardup_spark.errors import MachineError, UserError
from neardup_spark.redaction import SPARK_REDACTION_REGEX, redact_remote
from neardup_spark.runtime import console, interrupts, jvm_archive, preflight, start_failure
from neardup_spark.runtime.engine import ConnectEngine, engine_of, jvm_running, local_cores
from neardup_spark.runtime.spark_compat import check_spark_version

log = logging.getLogger(__name__)

# Applied when this process starts the JVM itself in local mode; any of them can be overridden
# with --set spark.KEY=VALUE or a config file's ``spark:`` mapping.
LOCAL_DEFAULTS = {
    "spark.driver.memory": "2g",
    # The command line draws its own progress line per stage (cli/progress.py).
    "spark.ui.showConsoleProgress": "false",
    # Adaptive execution re-plans after every shuffle and runs each query stage as its own job
    # (31 jobs in a local run instead of 15), for little to coalesce in 8 partitions (100,000
    # pages: 21.8 -> 20.9 s; README, Performance). Clusters keep it (conf/cluster.yaml).
    "spark.sql.adaptive.enabled": "false",
    # Input splits of ~5,000 documents: enough tasks to keep every core busy without shuffling
    # the texts, even for a corpus of a few tens of MB.
    "spark.sql.files.maxPartitionBytes": "8m",
    # The JVM's optimising JIT (C2) spent ~30 CPU-seconds compiling Spark's generated code in a
    # 100,000-document run, on a laptop's few cores: the quick C1 compiler alone cut a 30,000-
    # document job from 63 to 45 CPU-seconds (README, Performance).
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    # Python workers without the zips and jar Spark puts on their path: each task re-read those
    # archives' directories (~100 ms of CPU a task; neardup_spark/worker_daemon.py).
    "spark.python.daemon.module": "neardup_spark.runtime.worker_daemon",
    # Nothing listens beyond this machine: the driver's RPC and block manager on loopback (the
    # web UI too, through SPARK_LOCAL_IP: LOOPBACK_ENV), and no UI unless asked for (--ui).
    # None of these endpoints is authenticated (docs/operations/types-and-security.md).
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
}

# Spark binds its web UI to $SPARK_LOCAL_IP, else to every interface (no setting says
# otherwise in Spark 4.0); set for the JVM this process starts in local mode.
LOOPBACK_ENV = {"SPARK_LOCAL_IP": "127.0.0.1"}

# Settings for every JVM this process starts, local or on a cluster's master (under spark-submit,
# the cluster's settings rule).
STARTED_JVM_DEFAULTS = {
    # Spark's UI and event logs hide the values of settings named like a secret, as reports do.
    "spark.redaction.regex": SPARK_REDACTION_REGEX,
}

# Parquet timestamps written as INT64 microseconds with their UTC flag, not as INT96 (Spark's
# default, read back by pyarrow as timestamp[ns] without a zone): a timestamp column of the
# input keeps its type in deduplicated/. A runtime SQL setting, so it applies under
# spark-submit as well; a value the user set is kept.
PARQUET_TIMESTAMP_TYPE = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


# Shuffle partitions per core in local mode (when not set): each partition of the candidate and
# verification stages is a Python task with a fixed cost (~40 ms), and a local corpus is small
# for a shuffle; 30,000 pages, 8 -> 4 partitions on 2 cores: 10.8 / 11.2 -> 10.5 / 10.8 s (A/B).
LOCAL_SHUFFLE_PARTITIONS_PER_CORE = 2


def under_spark_submit() -> bool:
    """True when spark-submit started this Python process (its JVM is already running)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def keep_column_types(spark: SparkSession) -> None:
    """Have Parquet writes keep the input's timestamp types (:data:`PARQUET_TIMESTAMP_TYPE`),
    unless the session already has a value for that setting. Called by :func:`build_session`
    and by each run that writes input rows (a session the caller built, in the Python API)."""
    name, value = PARQUET_TIMESTAMP_TYPE
    if spark.conf.get(name, None) is None:
        spark.conf.set(name, value)


def spark_section(spark: SparkSession) -> dict[str, Any]:
    """The report's ``spark`` section: version, master, and the kind of session."""
    engine = engine_of(spark)
    return {"version": spark.version, "master": engine.master(), "session": engine.kind}


def remote_url(settings: SessionSettings) -> str | None:
    """The Spark Connect server to use: ``remote`` (``--remote``), else ``spark.remote`` of
    the ``spark:`` settings, else ``$SPARK_REMOTE``; None for a classic session."""
    return settings.remote or settings.spark.get("spark.remote") or os.environ.get("SPARK_REMOTE")


def build_session(
    settings: SessionSettings | None = None, app_name: str = "neardup-spark"
) -> SparkSession:
    """A SparkSession with ``settings`` (default: :class:`SessionSettings`'s).

    Spark Connect when :func:`remote_url` names a server (:func:`connect_session`). Else a
    classic session, whose master is the one spark-submit was given, else ``settings.master``,
    else ``local[*]``. Python workers run the interpreter running this code unless
    PYSPARK_PYTHON says otherwise. Unless :mod:`~neardup_spark.runtime.console` is verbose, a
    JVM started here keeps quiet.
    """
    settings = settings or SessionSettings()
    remote = remote_url(settings)
    if remote and not under_spark_submit():
        if settings.master:
            raise UserError(
                f"give a master (--master {settings.master}) or a Spark Connect server "
                f"(--remote {redact_remote(remote)}), not both"
            )
        return connect_session(remote, settings, app_name)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = settings.spark.get("spark.master") or settings.master or "local[*]"
    launching = not under_spark_submit() and not jvm_running()
    preflight.check_start(settings.spark, master, launching)
    quiet = not console.SETTINGS.verbose and not under_spark_submit()
    conf, jvm_env = classic_conf(settings, quiet)
    builder = SparkSession.builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = start_classic(builder, jvm_env, settings.spark, master)
    default_level = "ERROR" if quiet else "WARN"
    engine_of(spark).quiet(os.environ.get("NEARDUP_SPARK_LOG_LEVEL", default_level))
    check_spark_version(spark)
    return spark


def classic_conf(settings: SessionSettings, quiet: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The Spark settings of a classic session, and the environment the JVM launched for it
    needs (:data:`LOOPBACK_ENV` in local mode): this module's defaults for a JVM started here
    (local mode: :data:`LOCAL_DEFAULTS`), then ``settings.spark``; spark-submit's JVM gets the
    latter only."""
    conf: dict[str, str] = {}
    jvm_env: dict[str, str] = {}
    if not under_spark_submit():
        master = settings.master or "local[*]"
        conf["spark.master"] = master
        conf.update(STARTED_JVM_DEFAULTS)
        if master.startswith("local"):
            conf.update(LOCAL_DEFAULTS)
            jvm_env = {k: v for k, v in LOOPBACK_ENV.items() if k not in os.environ}
            partitions = LOCAL_SHUFFLE_PARTITIONS_PER_CORE * local_cores(master)
            conf["spark.sql.shuffle.partitions"] = str(partitions)
            archive = jvm_archive.java_options()
            if archive:  # classes pre-parsed by ``neardup jvm-archive`` (jvm_archive.py)
                java_options = conf["spark.driver.extraJavaOptions"]
                conf["spark.driver.extraJavaOptions"] = f"{java_options} {archive}"
    conf.update(settings.spark)
    if quiet:
        java_options = conf.get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = f"{java_options} {console.quiet_java_options()}"
    conf["spark.sql.execution.arrow.maxRecordsPerBatch"] = str(settings.arrow_batch_size)
    return conf, jvm_env


def start_classic(
    builder: SparkSession.Builder,
    jvm_env: dict[str, str],
    user_settings: dict[str, str],
    master: str,
) -> SparkSession:
    """``builder``'s session, started with the JVM's output captured (console.StartCapture): a
    start that fails is one :class:`UserError` or :class:`MachineError`
    (:func:`~neardup_spark.runtime.start_failure.explain`), not a stack trace."""
    capture = None if under_spark_submit() else console.StartCapture(console.SETTINGS.verbose)
    os.environ.update(jvm_env)  # read by the JVM launched now, not kept by this process
    try:
        spark = builder.getOrCreate()
        interrupts.install()  # over PySpark's SIGINT handler (runtime/interrupts.py)
        interrupts.watch(spark)
        keep_column_types(spark)  # builds the SQL session: a SQL setting it refuses fails here
    except BaseException as exc:  # a signal too: this process's stdout and stderr come back
        output = capture.failed() if capture is not None else []
        known = isinstance(exc, (UserError, MachineError)) or not isinstance(exc, Exception)
        if known or interrupts.received() is not None:
            raise
        log.info("the session did not start", exc_info=True)  # -v: the whole story
        raise start_failure.explain(exc, output, user_settings, master) from None
    finally:
        for name in jvm_env:
            os.environ.pop(name, None)
    if capture is not None:
        capture.succeeded()
    return spark


# Seconds to wait for a Spark Connect server's port to answer before saying it is not there.
CONNECT_TIMEOUT_SECONDS = 15.0
_DEFAULT_CONNECT_PORT = 15002


def stop_session(spark: SparkSession) -> None:
    """Stop a command's session (called from its ``finally``). When the command is ending on a
    user error, which it reports in one line, what the JVM says while it is torn down is not
    shown: a task may still be finishing (JSON schema inference's, say) and log, with a stack
    trace, that its broadcast is gone."""
    if isinstance(sys.exc_info()[1], (UserError, MachineError)):
        console.mute_jvm()
    spark.stop()


def check_reachable(url: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """Refuse a Spark Connect URL that is malformed (:class:`UserError`, exit 2) or whose host
    and port do not answer (:class:`MachineError`, exit 3), before the client's retries would
    wait minutes for it."""
    shown = redact_remote(url)
    parts = urlsplit(url.split(";", 1)[0])
    try:
        port = parts.port or _DEFAULT_CONNECT_PORT
    except ValueError:  # a port that is not a number
        port = None
    if parts.scheme != "sc" or not parts.hostname or port is None:
        raise UserError(f"not a Spark Connect URL: {shown} (expected sc://HOST:PORT)")
    reason = preflight.tcp_problem(parts.hostname, port, timeout)
    if reason is not None:
        raise MachineError(
            f"cannot reach the Spark Connect server at {shown} ({reason}); is it running?"
        )


def connect_session(url: str, settings: SessionSettings, app_name: str) -> SparkSession:
    """A Spark Connect session to ``url``, with the settings a client may change (runtime SQL
    settings); a setting that belongs to the server (static: memory, the worker daemon,
    plugins) is a :class:`UserError` saying so."""
    check_reachable(url)
    if not console.SETTINGS.verbose:
        console.quiet_connect_client()
    try:
        spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
        check_spark_version(spark)
    except (UserError, MachineError):
        raise
    except Exception as exc:  # the server answered TCP but not as a Spark Connect server
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"cannot open a Spark Connect session at {redact_remote(url)}: {first}"
        ) from None
    engine = engine_of(spark)
    if isinstance(engine, ConnectEngine):
        engine.tag_run()  # Ctrl-C interrupts this run's operations by their tag
    interrupts.watch(spark)
    wanted = {k: v for k, v in settings.spark.items() if k != "spark.remote"}
    wanted["spark.sql.execution.arrow.maxRecordsPerBatch"] = str(settings.arrow_batch_size)
    for key, value in wanted.items():
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # the server refuses a static or unknown setting
            spark.stop()
            raise UserError(
                f"{key} cannot be set from a Spark Connect client ({_first_line(exc)}); it is "
                "the server's setting: set it where the Spark Connect server starts"
            ) from None
    keep_column_types(spark)
    return spark


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
