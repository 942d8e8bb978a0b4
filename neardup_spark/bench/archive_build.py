"""Building the JVM class archive (``neardup jvm-archive``; ``make bench`` builds it first).

A child process runs a small dedupe in a JVM that dumps the classes it loaded at exit
(``-XX:ArchiveClassesAtExit``); the archive is renamed into place only after that JVM exited,
because a truncated archive crashes the JVM that maps it. See
:mod:`neardup_spark.runtime.jvm_archive` for where it lives and how sessions map it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from neardup_spark.bench.processes import neardup_command
from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.errors import EXIT_MACHINE_ERROR, EXIT_USER_ERROR, MachineError, UserError
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import write_corpus
from neardup_spark.runtime.jvm_archive import (
    ARCHIVE_ENV,
    ARCHIVE_GLOB,
    QUIET_OPTIONS,
    archive_path,
    is_stale,
    source_file,
    source_record,
)
from neardup_spark.runtime.session import LOCAL_DEFAULTS, build_session

log = logging.getLogger(__name__)

_BUILD_DOCS = 3000  # enough for every stage of the job to run and load its classes


def build(path: Path | None = None, force: bool = False) -> Path:
    """Build the archive at ``path`` (default :func:`archive_path`) unless it exists."""
    path = path if path is not None else archive_path()
    if path is None:
        raise RuntimeError(f"no archive path: Java not found, or {ARCHIVE_ENV}=off")
    if path.is_file() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        run_dump(partial)
        if not partial.is_file() or partial.stat().st_size == 0:
            raise RuntimeError(f"the JVM wrote no class archive at {partial}")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    record = source_record()
    try:  # the archive is usable without its record: a later build just cannot judge it
        if record is not None:
            source_file(path).write_text(json.dumps(record))
        remove_stale_archives(path.parent, keep=path)
    except OSError as exc:
        log.warning("JVM class archive built; stale archives not cleaned up: %s", exc)
    return path


def run_dump(partial: Path) -> None:
    """Run the build's child (``neardup jvm-archive --dump``). A child whose Spark could not
    start (exit 2 or 3, one ``error:`` line) is that error here, with its exit code, in one
    line; any other failure is ``CalledProcessError``. What else the child said (its progress
    lines) is passed on."""
    try:
        done = subprocess.run(
            [*neardup_command(), "jvm-archive", "--dump", str(partial)],
            check=True,
            env={**os.environ, ARCHIVE_ENV: "off"},
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or "").splitlines()
        errors = [line.removeprefix("error: ") for line in said if line.startswith("error: ")]
        if exc.returncode in (EXIT_USER_ERROR, EXIT_MACHINE_ERROR) and errors:
            failure = UserError if exc.returncode == EXIT_USER_ERROR else MachineError
            raise failure(f"the class archive's sample run: {errors[-1]}") from None
        sys.stderr.write(exc.stderr or "")
        raise
    sys.stderr.write(getattr(done, "stderr", None) or "")


def remove_stale_archives(directory: Path, keep: Path) -> list[Path]:
    """Delete the archives in ``directory`` whose install is gone or changed (~170 MB each: a
    clean clone's venv, a reinstalled Spark); archives other installs still use stay."""
    removed = []
    for archive in sorted(directory.glob(ARCHIVE_GLOB)):
        if archive != keep and is_stale(archive):
            archive.unlink(missing_ok=True)
            source_file(archive).unlink(missing_ok=True)
            removed.append(archive)
    if removed:
        log.info("removed %d stale JVM class archive(s) from %s", len(removed), directory)
    return removed


def dump(target: str) -> None:
    """Run a small dedupe in a JVM that archives its classes at exit; return once it exited."""
    base = LOCAL_DEFAULTS["spark.driver.extraJavaOptions"]
    options = f"{base} -XX:ArchiveClassesAtExit={target} {QUIET_OPTIONS}"
    settings = SessionSettings(master="local[2]", spark={"spark.driver.extraJavaOptions": options})
    with tempfile.TemporaryDirectory(prefix="neardup-jvm-archive-") as work:
        write_corpus(str(Path(work, "sample")), _BUILD_DOCS, seed=1, mean_words=200)
        spark = build_session(settings, app_name="neardup-jvm-archive")
        run(spark, str(Path(work, "sample", "corpus")), str(Path(work, "out")), DedupeConfig())
        spark.stop()
    from pyspark import SparkContext  # classic Spark only: this builds a local JVM's archive

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None:  # EOF on its stdin makes the JVM exit, writing the archive first
        proc.stdin.close()
        proc.wait(timeout=300)


# A fresh interpreter's time to have every kernel ready, printed by it (runtime/worker_daemon.py).
_KERNELS = "from neardup_spark.runtime.worker_daemon import warm_kernels; print(warm_kernels())"


def kernel_compile_seconds(workdir: Path) -> dict[str, float] | None:
    """What the first run on a fresh install pays for its kernels (``compile``: numba's cache
    empty, a cache directory of its own under ``workdir``) against a warm one (``cached``),
    each in a fresh process; None when it cannot be measured."""
    cache = workdir / "numba-cache-cold"
    shutil.rmtree(cache, ignore_errors=True)
    seconds = {}
    try:
        for name in ("compile", "cached"):
            done = subprocess.run(
                [sys.executable, "-c", _KERNELS],
                capture_output=True,
                text=True,
                timeout=1800,
                check=True,
                env={**os.environ, "NUMBA_CACHE_DIR": str(cache)},
            )
            seconds[name] = round(float(done.stdout.strip().splitlines()[-1]), 2)
    except (subprocess.SubprocessError, ValueError, IndexError, OSError) as exc:
        log.warning("kernel compile time not measured: %s", exc)
        return None
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return seconds


def ensure_archive() -> dict[str, Any] | None:
    """Build the local JVM class archive before any row of ``neardup bench`` runs, so every
    Spark row (floor, neardup, MLlib) maps the same one: ``{path, built_seconds}`` (None when
    it existed), or None when it is off or cannot be built (the rows run without one)."""
    path = archive_path()
    if path is None:
        return None
    started = time.perf_counter()
    existed = path.is_file()
    try:
        build(path)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        log.warning("no JVM class archive (%s); the rows run without one", exc)
        return None
    built = None if existed else round(time.perf_counter() - started, 1)
    return {"path": str(path), "built_seconds": built}
