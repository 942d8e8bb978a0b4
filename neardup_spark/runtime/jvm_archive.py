"""Where the class-data-sharing archive of a local dedupe's classes lives, and the JVM options
that map it (built by :mod:`neardup_spark.bench.jvm_archive`).

A local job's JVM loads and verifies ~15,000 classes from Spark's jars, a fixed cost that
dominates small runs. Java 17's dynamic CDS archive (``-XX:ArchiveClassesAtExit``) keeps them
pre-parsed in a memory-mapped file: ``neardup jvm-archive`` builds one by running a small dedupe
in a child process, and local-mode sessions (:mod:`neardup_spark.runtime.session`) map it
when present.
Measured at 30,000 documents (README, Performance): Spark start-up 4.5 -> 2.1 s, work 16.3 ->
13.6 s. Nothing changes in what the job computes.

The archive belongs to one Java build and one set of Spark jars: its file name carries a digest
of both, so an upgrade simply finds no archive. It is built under a temporary name and renamed
only after the dumping JVM has exited, because a truncated archive crashes the JVM that maps it.
``NEARDUP_SPARK_JVM_ARCHIVE`` names another file, or ``off`` disables the archive.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pyspark

ARCHIVE_ENV = "NEARDUP_SPARK_JVM_ARCHIVE"
# The archive's classes only: a mismatch (another Java, other jars) falls back to normal loading.
QUIET_OPTIONS = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _java_binary() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home, "bin", "java") if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def _spark_jars() -> Path:
    return Path(pyspark.__file__).parent / "jars"


def archive_key() -> str | None:
    """Digest of the Java binary and Spark's jars (where, names and sizes: the JVM maps an
    archive only for the class path it was dumped with); None without Java."""
    java = _java_binary()
    if java is None:
        return None
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    jars = _spark_jars().resolve()
    digest.update(f"{jars}\n".encode())
    if jars.is_dir():
        for jar in sorted(jars.iterdir()):
            digest.update(f"{jar.name}:{jar.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def archive_path() -> Path | None:
    """Where this machine's archive lives (it may not exist); None if disabled or no Java."""
    chosen = os.environ.get(ARCHIVE_ENV)
    if chosen:
        return None if chosen == "off" else Path(chosen)
    key = archive_key()
    if key is None:
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "neardup-spark" / f"jvm-classes-{key}.jsa"


def java_options(path: Path | None = None) -> str:
    """JVM options that map the archive at ``path`` (default :func:`archive_path`), or "" if
    there is none."""
    path = path if path is not None else archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET_OPTIONS}"
