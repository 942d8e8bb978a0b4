"""Where the class-data-sharing archive of a local dedupe's classes lives, and the JVM options
that map it (built by :mod:`neardup_spark.bench.archive_build`).

A local job's JVM loads and verifies ~15,000 classes from Spark's jars, a fixed cost that
dominates small runs. Java 17's dynamic CDS archive (``-XX:ArchiveClassesAtExit``) keeps them
pre-parsed in a memory-mapped file: ``neardup jvm-archive`` builds one by running a small dedupe
in a child process, and local-mode sessions (:mod:`neardup_spark.runtime.session`) map it
when present.
Measured at 30,000 documents (README, Performance): Spark start-up 4.5 -> 2.1 s, work 16.3 ->
13.6 s. Nothing changes in what the job computes.

The archive belongs to one Java build and one set of Spark jars: its file name carries a digest
of both (paths, sizes, modification times, as the JVM checks them), so an upgrade or a reinstall
simply finds no archive, and building the new one removes archives whose install is gone. It is
built under a temporary name and renamed only after the dumping JVM has exited, because a
truncated archive crashes the JVM that maps it. ``NEARDUP_SPARK_JVM_ARCHIVE`` names another
file, or ``off`` disables the archive.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pyspark

ARCHIVE_ENV = "NEARDUP_SPARK_JVM_ARCHIVE"
# The archive's classes only: a mismatch (another Java, other jars) falls back to normal loading.
QUIET_OPTIONS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_PREFIX, _SUFFIX = "jvm-classes-", ".jsa"
ARCHIVE_GLOB = f"{_PREFIX}*{_SUFFIX}"  # the default-named archives in the cache directory


def _java_binary() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home, "bin", "java") if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def _spark_jars() -> Path:
    return Path(pyspark.__file__).parent / "jars"


def archive_key(java: Path | None = None, jars: Path | None = None) -> str | None:
    """Digest of the Java binary and Spark's jars (where, names, sizes and modification times:
    the JVM maps an archive only for the class path it was dumped with, and checks each jar's
    size and time, so a reinstall at the same path is another key); None without Java.
    ``java`` and ``jars`` default to this process's."""
    java = java if java is not None else _java_binary()
    if java is None or not java.exists():
        return None
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    jars = (jars if jars is not None else _spark_jars()).resolve()
    digest.update(f"{jars}\n".encode())
    if jars.is_dir():
        for jar in sorted(jars.iterdir()):
            jar_stat = jar.stat()
            digest.update(f"{jar.name}:{jar_stat.st_size}:{jar_stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def source_record() -> dict[str, str] | None:
    """The Java binary and jars directory this process's archive belongs to, as written beside
    a built archive (``<archive>.source``) so a later build can tell stale archives from other
    installs' current ones; None without Java."""
    java = _java_binary()
    if java is None:
        return None
    return {"java": str(java), "jars": str(_spark_jars().resolve())}


def source_file(archive: Path) -> Path:
    """Where :func:`source_record` is written beside ``archive``."""
    return archive.with_name(archive.name + ".source")


def is_stale(archive: Path) -> bool:
    """True if ``archive`` (a default-named ``jvm-classes-KEY.jsa``) belongs to an install that
    is gone or changed: its recorded Java and jars no longer give its key. An archive without a
    record (built elsewhere, or by an older version) is not judged stale."""
    record_file = source_file(archive)
    try:
        record = json.loads(record_file.read_text())
        java, jars = Path(record["java"]), Path(record["jars"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    key = archive.name.removeprefix(_PREFIX).removesuffix(_SUFFIX)
    return not jars.is_dir() or archive_key(java, jars) != key


def archive_path() -> Path | None:
    """Where this machine's archive lives (it may not exist); None if disabled or no Java."""
    chosen = os.environ.get(ARCHIVE_ENV)
    if chosen:
        return None if chosen == "off" else Path(chosen)
    key = archive_key()
    if key is None:
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "neardup-spark" / f"{_PREFIX}{key}{_SUFFIX}"


def java_options(path: Path | None = None) -> str:
    """JVM options that map the archive at ``path`` (default :func:`archive_path`), or "" if
    there is none."""
    path = path if path is not None else archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET_OPTIONS}"
