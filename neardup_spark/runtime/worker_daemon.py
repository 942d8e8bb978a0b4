"""PySpark's Python worker daemon, minus the archives Spark puts on the workers' path for nothing.

Spark starts its Python workers with ``pyspark.zip``, the py4j zip and the ``spark-core`` jar at
the front of ``PYTHONPATH``, and every task begins with ``importlib.invalidate_caches()``, which
makes each of the ~16 zip importers those archives leave in ``sys.path_importer_cache`` re-read
its archive's whole directory: ~100 ms of CPU per task, 10 CPU-seconds of a 100,000-document
local run. With pyspark installed by pip, the installed packages are the same files: this
daemon drops the archives whose packages are importable, byte-identical, from a directory on
the path (and archives holding no Python at all), then runs ``pyspark.daemon`` as usual.

A worker whose task the JVM gave up on (a cancelled job: the id check cancels the per-document
pass when it finds a bad id) would print an ``EOFError`` traceback on the console: PySpark's
worker reports errors of the task's own code to the JVM, but one raised while it reads the JVM's
closing handshake (the socket already closed) escapes to the daemon, which prints it. This
daemon lets such a worker end quietly (:func:`quiet_when_the_jvm_hangs_up`).

On a CPU with AVX-512 it lets numba's compiler use 512-bit vectors
(:func:`neardup_spark.kernels.cpu_features.prefer_wide_vectors`, as every process that imports
the kernels: the MinHash loop 21.5 -> 13.7 us a page). Then it imports the job's Python stages
and loads their compiled kernels once (:func:`preload`), before it forks any worker: each worker
otherwise spent ~0.45 s importing and ~0.4 s loading numba's cached machine code at its first task.

Used in local mode only (``spark.python.daemon.module``, set by
:mod:`neardup_spark.runtime.session`):
on a cluster the package reaches the executors with ``--py-files``, after the daemon started.
Only the standard library is imported before the path is cleaned.
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Callable
from importlib.machinery import PathFinder
from typing import Any

# A package's identity: the first of these files it has (pyspark and py4j have version.py).
_IDENTITY_FILES = ("version.py", "__init__.py")


def _top_level_packages(names: list[str]) -> set[str]:
    """Top-level Python packages in an archive's file list (``pkg/__init__.py``)."""
    return {n.split("/")[0] for n in names if n.count("/") == 1 and n.endswith("/__init__.py")}


def _has_python(names: list[str]) -> bool:
    return any(n.endswith((".py", ".pyc")) for n in names)


def _same_package(archive: zipfile.ZipFile, package: str, directories: list[str]) -> bool:
    """``package`` in ``archive`` is also importable from ``directories``, with the same
    identity file (version.py, else __init__.py) byte for byte."""
    spec = PathFinder.find_spec(package, directories)
    if spec is None or not spec.submodule_search_locations:
        return False
    location = next(iter(spec.submodule_search_locations))
    for name in _IDENTITY_FILES:
        installed = os.path.join(location, name)
        try:
            packed = archive.read(f"{package}/{name}")
        except KeyError:
            continue
        try:
            with open(installed, "rb") as handle:
                return handle.read() == packed
        except OSError:
            return False
    return False


def redundant_archives(path: list[str]) -> list[str]:
    """The entries of ``path`` that are archives adding nothing: no Python inside, or only
    top-level packages importable, identical, from the path's directories."""
    directories = [p for p in path if not os.path.isfile(p)]
    redundant = []
    for entry in path:
        if not os.path.isfile(entry):
            continue
        try:
            with zipfile.ZipFile(entry) as archive:
                names = archive.namelist()
                packages = _top_level_packages(names)
                top_modules = [n for n in names if "/" not in n and n.endswith(".py")]
                if not _has_python(names) or (
                    packages
                    and not top_modules
                    and all(_same_package(archive, p, directories) for p in packages)
                ):
                    redundant.append(entry)
        except (OSError, zipfile.BadZipFile):
            continue
    return redundant


def drop_redundant_archives() -> list[str]:
    """Remove :func:`redundant_archives` from ``sys.path`` and their importers from
    ``sys.path_importer_cache``; returns what was removed."""
    dropped = redundant_archives(sys.path)
    if dropped:
        sys.path[:] = [p for p in sys.path if p not in dropped]
        for key in list(sys.path_importer_cache):
            if any(key == d or key.startswith(d + os.sep) for d in dropped):
                del sys.path_importer_cache[key]
    return dropped


def quiet_when_the_jvm_hangs_up(worker: Callable[..., int]) -> Callable[..., int]:
    """PySpark's daemon ``worker(sock, authenticated)``, ending with code 1 instead of raising
    when the JVM closed the connection. Errors of the task's code never get here: the worker
    sends those to the JVM, which fails the task with them; what escapes is a protocol read or
    write on a socket the JVM closed (a killed task), which nobody would read."""

    def worker_until_hung_up(*args: Any) -> int:
        try:
            return worker(*args)
        except (EOFError, ConnectionError):  # BrokenPipeError, ConnectionResetError
            return 1

    return worker_until_hung_up


def preload() -> None:
    """Import the modules the job's Python tasks use and run each compiled kernel once on a
    tiny input (numba loads its cached machine code at a function's first call). Forked workers
    inherit all of it. Idempotent, and cheap once done."""
    import importlib

    import pyarrow as pa

    # Stages with no compiled kernel to run here; components imports SciPy (union-find).
    for module in ("neardup_spark.pipeline.components", "neardup_spark.stages.candidates"):
        importlib.import_module(module)
    from neardup_spark.batch.documents import documents_columns_fn
    from neardup_spark.batch.scoring import score_sorted_sides, sets_from_texts_fn
    from neardup_spark.config import DedupeConfig

    ids = pa.array([1, 2])
    texts = pa.array(["one two three four five six", "caf\u00e9 two three four five six"])
    batch = pa.RecordBatch.from_arrays([ids, texts], names=["doc_id", "text"])
    for method in ("minhash", "simhash"):
        documents_columns_fn(DedupeConfig(method=method))(batch)
    # One candidate pair's two side rows, scored as verification scores them.
    sides = pa.RecordBatch.from_arrays(
        [pa.array([1, 1]), pa.array([2, 2]), texts], names=["doc_a", "doc_b", "text"]
    )
    list(score_sorted_sides([sides], sets_from_texts_fn(DedupeConfig())))
    _preload_boilerplate(batch)


def _preload_boilerplate(batch: Any) -> None:
    """The boilerplate passes' kernels: counting, and cleaning by a broadcast set and by
    per-document lists (``neardup boilerplate``, ``dedupe --strip-boilerplate``)."""
    import numpy as np
    import pyarrow as pa

    from neardup_spark.batch.boilerplate import BoilerplateSet, strip_columns_fn, unit_counts_fn
    from neardup_spark.config import BoilerplateOptions, DedupeConfig

    config = DedupeConfig(boilerplate=BoilerplateOptions(mode="repeats", min_words=1))
    unit_counts_fn(config)(batch)
    found = BoilerplateSet(np.zeros(1, dtype=np.uint64), pa.array([1]))
    strip_columns_fn(config, "text", "doc_id", lambda: found)(batch)
    lists = pa.array([[1], None], pa.list_(pa.int64()))
    strip_columns_fn(config, "text", "doc_id", lambda: found)(
        batch.append_column("__neardup_drop_keys", lists)
    )


def warm_kernels() -> float:
    """Compile every kernel a run's Python tasks use into numba's on-disk cache, as the daemon
    will look for it (the same CPU features: call in a fresh process, before numba is
    imported); returns the seconds it took (compiling, or loading what was cached)."""
    import time

    from neardup_spark.kernels.cpu_features import prefer_wide_vectors

    prefer_wide_vectors()
    started = time.perf_counter()
    preload()
    return time.perf_counter() - started


if __name__ == "__main__":
    drop_redundant_archives()
    import pyspark.daemon  # imported only now: from the installed copy

    pyspark.daemon.worker = quiet_when_the_jvm_hangs_up(pyspark.daemon.worker)
    from neardup_spark.kernels.cpu_features import prefer_wide_vectors

    prefer_wide_vectors()
    try:
        preload()
    except Exception as exc:  # a worker then loads what it needs itself, as without preload
        print(f"neardup worker daemon: preload failed: {exc!r}", file=sys.stderr)
    pyspark.daemon.manager()
