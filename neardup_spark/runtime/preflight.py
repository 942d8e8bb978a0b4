"""What can be checked before a JVM is launched, so that a run that cannot start says so in one
line instead of in a failed launch's stack trace (:func:`check_start`, called by
:func:`neardup_spark.runtime.session.build_session` when this process launches Spark):

* Spark itself: ``SPARK_HOME``, else the ``pyspark`` package's own jars (a Spark Connect client
  package has none);
* Java, found as Spark's launcher finds it (``JAVA_HOME/bin/java``, else ``java`` on PATH), and
  its version against the oldest the installed Spark runs on: the class-file version of Spark's
  launcher (Java 8 for Spark 3.5, 17 for Spark 4), not a number written here;
* sizes Spark parses as byte strings (``spark.driver.memory=abc``): the rule of Spark's
  ``JavaUtils.byteStringAs``, and for the driver's memory the JVM's ``-Xmx`` form as well,
  since the launcher hands it to the JVM as is;
* a cluster's master (``spark://``, ``k8s://``) answering on its port: Spark's own client
  tries three times 20 s apart, then fails with an unrelated error.

A machine that is not as a run needs it is a :class:`MachineError` (exit 3, "fix the machine");
a value that cannot be right is a :class:`UserError` (exit 2, "fix the command").
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import subprocess
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from neardup_spark.errors import MachineError, UserError

# Seconds to wait for a master's or a Spark Connect server's port to answer.
REACHABLE_TIMEOUT_SECONDS = 15.0
JAVA_VERSION_TIMEOUT_SECONDS = 60.0
_DEFAULT_PORTS = {"spark": 7077, "https": 443, "http": 80}
# What spark-submit takes for a master besides "yarn" (SparkSubmit; mesos up to Spark 3.5).
_MASTER_PREFIXES = ("local", "spark", "k8s", "mesos")

# A class file's major version is the Java feature release it was compiled for, plus 44.
_CLASS_MAGIC, _CLASS_VERSION_OFFSET = b"\xca\xfe\xba\xbe", 44
_LAUNCHER_CLASS = "org/apache/spark/launcher/Main.class"
_LAUNCHER_JAR = re.compile(r"spark-launcher_[\d.]+-(?P<version>[^/]+)\.jar$")

# Spark settings parsed as byte strings (ConfigBuilder.bytesConf); a unit-less number is each
# one's default unit. Only autoBroadcastJoinThreshold takes a negative size (-1: never).
SIZE_SETTINGS = frozenset(
    {
        "spark.driver.memory",
        "spark.driver.memoryOverhead",
        "spark.driver.maxResultSize",
        "spark.executor.memory",
        "spark.executor.memoryOverhead",
        "spark.executor.pyspark.memory",
        "spark.memory.offHeap.size",
        "spark.kryoserializer.buffer",
        "spark.kryoserializer.buffer.max",
        "spark.reducer.maxSizeInFlight",
        "spark.shuffle.file.buffer",
        "spark.sql.files.maxPartitionBytes",
        "spark.sql.autoBroadcastJoinThreshold",
    }
)
_SIGNED_SIZES = frozenset({"spark.sql.autoBroadcastJoinThreshold"})
# JavaUtils.byteStringAs: digits and an optional unit, case and outer blanks ignored.
_BYTE_SUFFIXES = frozenset({"b", "k", "kb", "m", "mb", "g", "gb", "t", "tb", "p", "pb"})
_BYTE_STRING = re.compile(r"([0-9]+)([a-z]+)?")
_FRACTION = re.compile(r"([0-9]+\.[0-9]+)([a-z]+)?")
_LONG_MAX = (1 << 63) - 1
# What the JVM's -Xmx takes (the launcher passes spark.driver.memory to it unchanged); a number
# without a unit would be bytes to the JVM and MiB to Spark.
_JVM_SIZE = re.compile(r"[0-9]+[kKmMgGtT]")


@dataclass(frozen=True)
class Java:
    """The Java a launch would use, and where it was found."""

    path: Path
    version: int  # the feature release: 8, 11, 17, 21
    source: str  # "JAVA_HOME" or "PATH"


def check_start(settings: Mapping[str, str], master: str | None, launching: bool) -> None:
    """Everything :mod:`this module <neardup_spark.runtime.preflight>` checks, for a classic
    session with the Spark ``settings`` the user gave and ``master``; ``launching``: this
    process starts the JVM (not spark-submit's)."""
    check_sizes(settings, launching)
    if launching:
        check_java()
        if master:
            check_master_url(master)
            check_master(master)


def check_master_url(master: str) -> None:
    """Refuse (:class:`UserError`) a master spark-submit would refuse after the JVM started.

    >>> check_master_url("local[2]"), check_master_url("yarn")
    (None, None)
    """
    if master != "yarn" and not master.startswith(_MASTER_PREFIXES):
        raise UserError(
            f"--master {master}: not a master Spark knows (local, local[N], spark://HOST:PORT, "
            "yarn or k8s://URL)"
        )


def size_problem(value: str, signed: bool = False) -> str | None:
    """Why Spark's ``JavaUtils.byteStringAs`` refuses ``value``, None if it takes it.

    >>> size_problem("4g"), size_problem(" 512MB "), size_problem("1024")
    (None, None, None)
    >>> size_problem("abc")
    'not a size'
    >>> size_problem("1.5g")
    'fractional sizes are not supported'
    >>> size_problem("4gib")
    "unknown unit 'gib'"
    """
    text = value.strip().lower()
    if signed and text.startswith("-"):
        text = text[1:]
    whole = _BYTE_STRING.fullmatch(text)
    if whole is None:
        return "fractional sizes are not supported" if _FRACTION.fullmatch(text) else "not a size"
    if whole.group(2) is not None and whole.group(2) not in _BYTE_SUFFIXES:
        return f"unknown unit {whole.group(2)!r}"
    if int(whole.group(1)) > _LONG_MAX:
        return "too large"
    return None


def check_sizes(settings: Mapping[str, str], launching: bool) -> None:
    """Refuse (:class:`UserError`) a size setting Spark would refuse, naming it."""
    for key, value in settings.items():
        if key not in SIZE_SETTINGS:
            continue
        problem = size_problem(value, signed=key in _SIGNED_SIZES)
        jvm_heap = launching and key == "spark.driver.memory"
        if problem is None and jvm_heap and not _JVM_SIZE.fullmatch(value.strip()):
            problem = "the driver's JVM takes a whole number and a unit k, m, g or t"
        if problem is not None:
            raise UserError(f"{key}={value}: {problem}; give a size such as 512m or 4g")


def spark_home() -> Path:
    """The Spark a launch would start: ``$SPARK_HOME``, else the ``pyspark`` package's (as
    PySpark finds it, without its exit when there is none)."""
    chosen = os.environ.get("SPARK_HOME")
    if chosen:
        if not Path(chosen, "bin", "spark-submit").is_file():
            raise MachineError(
                f"SPARK_HOME={chosen} is not a Spark installation (no bin/spark-submit): point "
                "it at one, or unset it to use the pyspark package's own Spark"
            )
        return Path(chosen)
    import pyspark

    package = Path(pyspark.__file__).resolve().parent
    for home in (package / "spark-distribution", package):
        if (home / "bin" / "spark-submit").is_file() and (home / "jars").is_dir():
            return home
    raise MachineError(
        f"the pyspark package at {package} has no Spark to start (no jars: a Spark Connect "
        "client package?): install neardup-spark[spark], set SPARK_HOME, or give --remote"
    )


@functools.cache
def spark_launcher(home: Path) -> tuple[int, str] | None:
    """(oldest Java release, Spark version) of the Spark at ``home``, read from its launcher
    jar; None when it cannot be read."""
    for jar in sorted((home / "jars").glob("spark-launcher_*.jar")):
        try:
            with zipfile.ZipFile(jar) as archive:
                head = archive.read(_LAUNCHER_CLASS)[:8]
        except (OSError, KeyError, zipfile.BadZipFile):
            continue
        named = _LAUNCHER_JAR.search(jar.name)
        if head[:4] == _CLASS_MAGIC and named is not None:
            return int.from_bytes(head[6:8], "big") - _CLASS_VERSION_OFFSET, named["version"]
    return None


def find_java(wanted: str) -> tuple[Path, str]:
    """The java binary a launch would run, as Spark's ``bin/spark-class`` finds it: a set
    ``JAVA_HOME`` is used as is (no fallback to PATH). ``wanted`` ("Java 17 or later") goes
    into the message of a :class:`MachineError`."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home, "bin", "java")
        if not (java.is_file() and os.access(java, os.X_OK)):
            raise MachineError(
                f"JAVA_HOME={home} holds no Java (no executable bin/java): point it at an "
                f"installation of {wanted}, or unset it to use the java on PATH"
            )
        return java, "JAVA_HOME"
    found = shutil.which("java")
    if found is None:
        raise MachineError(
            f"no Java: JAVA_HOME is not set and no java is on PATH; install {wanted} and put "
            "it on PATH, or set JAVA_HOME"
        )
    return Path(found), "PATH"


def feature_release(version: str) -> int | None:
    """The feature release of a Java version string.

    >>> feature_release("17.0.15"), feature_release("1.8.0_392"), feature_release("21-ea")
    (17, 8, 21)
    """
    parts = re.findall(r"\d+", version)
    if not parts:
        return None
    return int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0])


@functools.cache
def java_version(java: Path) -> int:
    """The feature release of ``java``: the ``release`` file of its installation, else what
    ``java -version`` prints (once per process and binary)."""
    try:
        text = (java.resolve().parent.parent / "release").read_text()
        stated = re.search(r'^JAVA_VERSION="([^"]+)"', text, re.MULTILINE)
    except (OSError, UnicodeDecodeError):
        stated = None
    listed = feature_release(stated[1]) if stated is not None else None
    if listed is not None:
        return listed
    try:
        done = subprocess.run(
            [str(java), "-version"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=JAVA_VERSION_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise MachineError(f"{java} does not run ({reason}): reinstall Java") from None
    said = (done.stderr + done.stdout).strip()
    found = re.search(r'version "([^"]+)"', said)
    release = feature_release(found[1]) if found is not None else None
    if done.returncode != 0 or release is None:
        first = said.splitlines()[0][:200] if said else f"exit {done.returncode}, no output"
        raise MachineError(f"{java} -version failed ({first}): reinstall Java")
    return release


def check_java() -> Java:
    """The Java a launch would use, refused (:class:`MachineError`) when there is none, it does
    not run, or it is older than the installed Spark needs."""
    home = spark_home()
    launcher = spark_launcher(home)
    need, spark = launcher if launcher is not None else (None, "")
    wanted = f"Java {need} or later" if need else "Java"
    path, source = find_java(wanted)
    version = java_version(path)
    if need is not None and version < need:
        raise MachineError(
            f"Java {version} ({path}, from {source}) is too old: Spark {spark} needs {wanted}; "
            "install it and put it on PATH, or point JAVA_HOME at it"
        )
    return Java(path, version, source)


def tcp_problem(host: str, port: int, timeout: float = REACHABLE_TIMEOUT_SECONDS) -> str | None:
    """Why nothing answers on ``host:port`` (a refused connection, a timeout, an unknown host);
    None when something does."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) a ``spark://`` master (one or several, comma-separated) or a ``k8s://``
    API server listens on; [] for other masters (local, yarn). :class:`UserError` for such a
    URL without a host or with a bad port."""
    scheme, _, rest = master.partition("://")
    if scheme not in ("spark", "k8s") or not rest:
        return []
    if scheme == "spark":
        urls = [f"spark://{part.strip()}" for part in rest.split(",")]
    else:  # k8s://https://HOST:PORT, or k8s://HOST:PORT meaning https
        urls = [rest if "://" in rest else f"https://{rest}"]
    addresses = []
    for url in urls:
        parts = urlsplit(url)
        try:
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise UserError(f"--master {master}: not a master URL (expected {scheme}://HOST:PORT)")
        addresses.append((parts.hostname, port))
    return addresses


def check_master(master: str, timeout: float = REACHABLE_TIMEOUT_SECONDS) -> None:
    """Refuse (:class:`MachineError`) a cluster master none of whose addresses answers."""
    addresses = master_addresses(master)
    problems = [tcp_problem(host, port, timeout) for host, port in addresses]
    if addresses and all(problems):
        raise MachineError(
            f"the Spark master at {master} does not answer ({problems[0]}); is it running, "
            "and is this its address?"
        )
