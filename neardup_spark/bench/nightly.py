"""The nightly case of ``neardup bench`` (``make bench-nightly`` runs it alone).

For each index size ``N`` (``--nightly-sizes``, default 100,000 and 300,000), one corpus of
``N + M`` generated documents (``--nightly-new`` ``M``, default 10,000) is cut in two:
``base/`` (the first ``N``) and ``new/`` (the next ``M``); ``all/`` holds both (hard links).
In one Spark session (``local[2]``, the CLI's settings; JVM up and Python workers warm for
every timed run):

1. ``base/`` is indexed (``run_incremental`` into a fresh index): timed, not compared;
2. *nightly*: ``new/`` against that index (``run_incremental``), all outputs published;
3. *full rerun*: one ``pipeline.run`` over ``all/``, all outputs written.

Each timing is wall seconds and CPU seconds of the whole process tree (driver, JVM, Python
workers; other work on a shared machine disturbs CPU seconds much less than wall time), the
best of ``--nightly-repeats`` (the index is restored between nightly repeats). The ratios
reported are ``full / nightly`` for both. The 1-minute load average is recorded before and
after each size (the bench is only meaningful on an otherwise idle machine).

Writes ``WORKDIR/nightly.json`` and ``WORKDIR/nightly.md``; corpora and indexes live under
``WORKDIR/nightly/`` and are reused while their ``corpus.json`` matches.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_SIZES = "100000,300000"
DEFAULT_NEW = 10_000
NIGHTLY_JSON = "nightly.json"
NIGHTLY_MD = "nightly.md"


# --------------------------------------------------------------------------------------------
# Measuring


def _nightly_corpus(
    root: Path, index_docs: int, new_docs: int, seed: int, mean_words: int
) -> dict[str, str]:
    """``base/`` (the first ``index_docs`` rows), ``new/`` (the next ``new_docs``) and ``all/``
    (both, hard links) of one generated corpus, reused while its marker matches."""
    import pyarrow.parquet as pq

    from neardup_spark.quality.generate import ROW_GROUP_ROWS, generate_corpus

    spec = {
        "index_docs": index_docs,
        "new_docs": new_docs,
        "seed": seed,
        "mean_words": mean_words,
        "row_group_rows": ROW_GROUP_ROWS,  # as `neardup generate` writes them (input splits)
    }
    marker = root / "corpus.json"
    paths = {k: str(root / k) for k in ("base", "new", "all")}
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return paths
    shutil.rmtree(root, ignore_errors=True)
    for k in paths:
        Path(paths[k]).mkdir(parents=True)
    table, _ = generate_corpus(index_docs + new_docs, seed=seed, mean_words=mean_words)
    step = 20_000
    for name, start, stop in (("base", 0, index_docs), ("new", index_docs, index_docs + new_docs)):
        for i, lo in enumerate(range(start, stop, step)):
            file = Path(paths[name]) / f"part-{i:05d}.parquet"
            pq.write_table(
                table.slice(lo, min(step, stop - lo)), file, row_group_size=ROW_GROUP_ROWS
            )
            os.link(file, Path(paths["all"]) / f"{name}-{i:05d}.parquet")
    marker.write_text(json.dumps(spec))
    return paths


def _dir_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def tree_cpu_seconds(pid: int | None = None) -> float | None:
    """CPU seconds (user + system) used so far by process ``pid`` (default: this one) and all
    its descendants: the JVM and the Python workers of a Spark session started here. Children
    that exited count once reaped. None where ``/proc`` is missing."""
    from neardup_spark.bench.processes import process_tree

    pids = process_tree(pid or os.getpid())
    if not pids:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return total / ticks


def _timed(action: Callable[..., Any], *args: Any) -> tuple[Any, float, float | None]:
    """``(result, wall seconds, CPU seconds of this process tree)`` of ``action(*args)``."""
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    result = action(*args)
    wall, cpu1 = time.perf_counter() - t0, tree_cpu_seconds()
    return result, wall, (cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None)


def _best_cpu(timings: list[tuple[Any, float, float | None]]) -> float | None:
    cpus = [t[2] for t in timings]
    return min(c for c in cpus if c is not None) if None not in cpus else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def bench_nightly(
    workdir: str = "out/bench/nightly",
    index_sizes: Sequence[int] = (100_000, 300_000),
    new_docs: int = DEFAULT_NEW,
    seed: int = 1,
    mean_words: int = 500,
    master: str = "local[2]",
    repeats: int = 1,
    threshold: float | None = None,
    echo: Callable[[str], None] | None = print,
) -> list[dict[str, Any]]:
    """Measure the nightly case (module docstring) for each size of ``index_sizes``.

    Returns one row per size: ``index_docs``, ``new_docs``, ``build_seconds``,
    ``nightly_seconds``, ``full_seconds``, ``speedup`` (full / nightly, wall),
    ``nightly_cpu_seconds``, ``full_cpu_seconds``, ``cpu_speedup``, ``nightly_growth``
    (nightly wall seconds over those at the first size), ``load_before``/``load_after``
    (1-minute load average), ``nightly_stage_seconds``, ``nightly_counts``, ``index_bytes``.
    """
    from neardup_spark.config import DedupeConfig, SessionSettings
    from neardup_spark.nightly.run import run_incremental
    from neardup_spark.pipeline.dedupe import run
    from neardup_spark.runtime.session import build_session

    config = DedupeConfig() if threshold is None else DedupeConfig(threshold=threshold)
    session = build_session(SessionSettings(master=master), app_name="neardup-bench-nightly")
    rows: list[dict[str, Any]] = []
    try:
        for n in index_sizes:
            root = Path(workdir) / f"docs-{n}+{new_docs}-seed-{seed}"
            generated = time.perf_counter()
            paths = _nightly_corpus(root / "corpus", n, new_docs, seed, mean_words)
            generate_seconds = time.perf_counter() - generated
            index_dir, saved = root / "index", root / "index-before-nightly"
            for path in (index_dir, saved):
                shutil.rmtree(path, ignore_errors=True)
            load_before = _load()
            _, build, build_cpu = _timed(
                run_incremental,
                session,
                paths["base"],
                str(root / "out-build"),
                str(index_dir),
                config,
                True,
            )
            if echo:
                echo(f"[nightly] {n:,}: index built in {build:.1f} s")
            if repeats > 1:
                shutil.copytree(index_dir, saved)
            nightly: list[tuple[Any, float, float | None]] = []
            full: list[tuple[Any, float, float | None]] = []
            for attempt in range(repeats):
                if attempt:
                    shutil.rmtree(index_dir)
                    shutil.copytree(saved, index_dir)
                nightly.append(
                    _timed(
                        run_incremental,
                        session,
                        paths["new"],
                        str(root / "out-nightly"),
                        str(index_dir),
                        config,
                        True,
                    )
                )
                full.append(
                    _timed(run, session, paths["all"], str(root / "out-full"), config, True)
                )
                if echo:
                    echo(
                        f"[nightly] {n:,}: {new_docs:,} new documents in {nightly[-1][1]:.1f} s, "
                        f"full rerun of {n + new_docs:,} in {full[-1][1]:.1f} s"
                    )
            shutil.rmtree(saved, ignore_errors=True)
            report = min(nightly, key=lambda t: t[1])[0]
            nightly_wall, full_wall = min(t[1] for t in nightly), min(t[1] for t in full)
            nightly_cpu, full_cpu = _best_cpu(nightly), _best_cpu(full)
            rows.append(
                {
                    "index_docs": n,
                    "new_docs": new_docs,
                    "repeats": repeats,
                    "generate_seconds": round(generate_seconds, 1),
                    "build_seconds": round(build, 1),
                    "build_cpu_seconds": round(build_cpu, 1) if build_cpu else None,
                    "nightly_seconds": round(nightly_wall, 1),
                    "full_seconds": round(full_wall, 1),
                    "speedup": _ratio(full_wall, nightly_wall),
                    "nightly_cpu_seconds": round(nightly_cpu, 1) if nightly_cpu else None,
                    "full_cpu_seconds": round(full_cpu, 1) if full_cpu else None,
                    "cpu_speedup": _ratio(full_cpu, nightly_cpu),
                    "all_nightly_seconds": [round(t[1], 1) for t in nightly],
                    "all_full_seconds": [round(t[1], 1) for t in full],
                    "load_before": load_before,
                    "load_after": _load(),
                    "nightly_stage_seconds": report["stage_seconds"],
                    "nightly_counts": report["counts"],
                    "index_bytes": _dir_bytes(str(index_dir)),
                }
            )
        first = rows[0]["nightly_seconds"] if rows else None
        for r in rows:
            r["nightly_growth"] = _ratio(r["nightly_seconds"], first)
    finally:
        session.stop()
    return rows


def format_nightly(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of :func:`bench_nightly` rows."""
    lines = [
        "| index docs | new docs | nightly s | full rerun s | speedup | nightly CPU s "
        "| full CPU s | CPU speedup | nightly growth | index build s | index size | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def num(value: float | None, suffix: str = "", digits: int = 1) -> str:
        return "-" if value is None else f"{value:,.{digits}f}{suffix}"

    for r in rows:
        lines.append(
            f"| {r['index_docs']:,} | {r['new_docs']:,} | {num(r['nightly_seconds'])} "
            f"| {num(r['full_seconds'])} | {num(r['speedup'], 'x')} "
            f"| {num(r.get('nightly_cpu_seconds'))} | {num(r.get('full_cpu_seconds'))} "
            f"| {num(r.get('cpu_speedup'), 'x')} | {num(r.get('nightly_growth'), digits=2)} "
            f"| {num(r['build_seconds'])} | {r['index_bytes'] / 2**20:,.0f} MiB "
            f"| {num(r.get('load_before'), digits=2)}-{num(r.get('load_after'), digits=2)} |"
        )
    return "\n".join(lines)
