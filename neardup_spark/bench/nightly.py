"""The nightly case of ``neardup bench`` (``make bench-nightly`` runs it alone).

For each index size ``N`` (``--nightly-sizes``, default 100,000 and 300,000), one corpus of
``N + M`` generated documents (``--nightly-new`` ``M``, default 10,000) is cut in two:
``base/`` (the first ``N``) and ``new/`` (the next ``M``); ``all/`` holds both (hard links).
In one Spark session (``local[2]``, the CLI's settings; JVM up and Python workers warm for
every timed run):

1. *plain run*: one ``pipeline.run`` over ``base/`` (what building the index is compared with);
2. ``base/`` is indexed (``run_incremental`` into a fresh index): the index build;
3. *nightly*: ``new/`` against that index (``run_incremental``), all outputs published;
4. *full rerun*: one ``pipeline.run`` over ``all/``, all outputs written.

The *cross-day recall*: of the full rerun's pairs joining a new document to an indexed one,
the fraction the index (after the night) puts in one cluster.

Then the *series* (``--nightly-series K``, default 30; 0 skips it): an index of
``--nightly-series-index`` documents (default 300,000) gets ``K`` nights of ``M`` new documents
one after the other, without compaction: the time per night must not creep up as the index
grows and its segments pile up.

*Work seconds* are those of the run's report (``wall_seconds``: from reading the input to
the committed output, in a warm session). Each timing is also wall seconds and CPU seconds of
the whole process tree (driver, JVM, Python
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
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import SparkSession

from neardup_spark.bench.cli_nights import cli_nights
from neardup_spark.bench.corpora import ensure_cut_corpus, ensure_nightly_corpus
from neardup_spark.bench.machine import machine_info, one_minute_load
from neardup_spark.bench.processes import tree_cpu_seconds
from neardup_spark.bench.settings import DEFAULT_NEW, BenchSettings
from neardup_spark.bench.tables import NIGHTLY_PAGE, nightly_markdown, write_page
from neardup_spark.columns import CLUSTER_ID, DOC_A, DOC_B, DOC_ID
from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.nightly.docs import latest_rows
from neardup_spark.nightly.match import run_match
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.store import Index
from neardup_spark.pipeline.dedupe import run
from neardup_spark.runtime.session import build_session
from neardup_spark.runtime.spark_compat import to_arrow

log = logging.getLogger(__name__)

NIGHTLY_JSON = "nightly.json"
NIGHTLY_MD = "nightly.md"

# (result, wall seconds, CPU seconds of this process tree) of one timed run.
Timing = tuple[Any, float, float | None]


def run_nightly(settings: BenchSettings, echo: Callable[[str], None]) -> int:
    """The nightly case with ``settings``: writes ``WORKDIR/nightly.json`` and ``.md`` and
    echoes the table. 0 on success, 1 when a run failed (recorded in the files)."""
    workdir = Path(settings.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {
            "index_sizes": list(settings.nightly_sizes),
            "new_docs": settings.nightly_new,
            "repeats": settings.nightly_repeats,
            "seed": settings.seed,
            "threshold": settings.threshold,
            "master": settings.master,
            "series_nights": settings.nightly_series,
            "series_index_docs": settings.nightly_series_index,
        },
    }
    started = time.perf_counter()
    status = 0
    try:
        measured = bench_nightly(
            str(workdir / "nightly"),
            settings.nightly_sizes,
            settings.nightly_new,
            seed=settings.seed,
            master=settings.master,
            repeats=settings.nightly_repeats,
            threshold=settings.threshold,
            echo=echo,
            series=(settings.nightly_series, settings.nightly_series_index),
        )
        results["rows"], results["series"] = measured["rows"], measured["series"]
    except Exception as exc:  # recorded in nightly.json/.md; the exit status says it failed
        log.exception("the nightly bench failed")
        results["error"] = f"{type(exc).__name__}: {exc}"
        results["rows"] = []
        status = 1
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    json_path, md_path = workdir / NIGHTLY_JSON, workdir / NIGHTLY_MD
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = nightly_markdown(results)
    md_path.write_text(text)
    echo(text)
    echo(f"[bench] wrote {json_path} and {md_path}")
    if settings.docs_out:
        page = Path(settings.docs_out) / NIGHTLY_PAGE
        write_page(page, "Nightly case", settings, results["machine"], text)
        echo(f"[bench] wrote {page}")
    return status


def bench_nightly(
    workdir: str = "out/bench/nightly",
    index_sizes: Sequence[int] = (100_000, 300_000),
    new_docs: int = DEFAULT_NEW,
    seed: int = 1,
    mean_words: int = 500,
    master: str = "local[2]",
    repeats: int = 1,
    threshold: float | None = None,
    echo: Callable[[str], None] | None = None,
    series: tuple[int, int] = (0, 300_000),
) -> dict[str, Any]:
    """Measure the nightly case (module docstring) for each size of ``index_sizes``.

    Returns one row per size: ``index_docs``, ``new_docs``, ``build_seconds``,
    ``nightly_seconds``, ``full_seconds``, ``speedup`` (full / nightly, wall),
    ``nightly_cpu_seconds``, ``full_cpu_seconds``, ``cpu_speedup``, ``nightly_growth``
    (nightly wall seconds over those at the first size), ``load_before``/``load_after``
    (1-minute load average), ``nightly_stage_seconds``, ``nightly_counts``, ``index_bytes``
    (with the ``*_work_seconds`` of each run's report, the plain run over the indexed documents
    and ``build_ratio``, and ``input_bytes``); then, when ``series`` (nights, index documents)
    asks for nights, :func:`bench_series`. Returns ``{"rows": [...], "series": {...} or None}``.
    ``echo`` receives one progress line per timed run.
    """
    config = DedupeConfig() if threshold is None else DedupeConfig(threshold=threshold)
    session = build_session(SessionSettings(master=master), app_name="neardup-bench-nightly")
    rows: list[dict[str, Any]] = []
    try:
        for n in index_sizes:
            size = NightlySize(
                Path(workdir) / f"docs-{n}+{new_docs}-seed-{seed}",
                n,
                new_docs,
                seed,
                mean_words,
                repeats,
                master,
            )
            rows.append(measure_size(session, config, size, echo or (lambda _: None)))
        first = rows[0]["nightly_work_seconds"] if rows else None
        for r in rows:
            r["nightly_growth"] = _ratio(r["nightly_work_seconds"], first)
        nights, series_docs = series
        timeline = None
        if nights:
            root = Path(workdir) / f"series-{series_docs}+{nights}x{new_docs}-seed-{seed}"
            timeline = bench_series(
                session,
                config,
                Series(root, series_docs, nights, new_docs, seed, mean_words),
                echo or (lambda _: None),
            )
    finally:
        session.stop()
    return {"rows": rows, "series": timeline}


@dataclass(frozen=True)
class NightlySize:
    """One size of the nightly case: its directory (corpus, index, outputs) and what it runs."""

    root: Path
    index_docs: int
    new_docs: int
    seed: int
    mean_words: int
    repeats: int
    master: str = "local[2]"


def measure_size(
    session: SparkSession, config: DedupeConfig, size: NightlySize, echo: Callable[[str], None]
) -> dict[str, Any]:
    """One row of :func:`bench_nightly`: a plain run over ``base/``, the index of ``base/``,
    then the nightly run of ``new/`` against it and the full rerun over ``all/``."""
    root = size.root
    generated = time.perf_counter()
    paths = ensure_nightly_corpus(
        root / "corpus", size.index_docs, size.new_docs, size.seed, size.mean_words
    )
    generate_seconds = time.perf_counter() - generated
    index_dir = root / "index"
    for path in (index_dir, root / "index-before-nightly"):
        shutil.rmtree(path, ignore_errors=True)
    load_before = one_minute_load()
    plain, plain_wall, _ = timed(full_run, session, paths["base"], str(root / "out-plain"), config)
    build, build_wall, build_cpu = timed(
        run_incremental,
        session,
        paths["base"],
        str(root / "out-build"),
        str(index_dir),
        config,
        True,
    )
    echo(
        f"[nightly] {size.index_docs:,}: index built in {build['wall_seconds']:.1f} s "
        f"(plain run {plain['wall_seconds']:.1f} s)"
    )
    shutil.copytree(index_dir, root / "index-before-nightly")
    nightly, full, matches = time_nightly_and_full(session, config, size, paths, echo)
    cli = cli_nights(root, paths, root / "index-before-nightly", size.master)
    shutil.rmtree(root / "index-before-nightly", ignore_errors=True)
    echo(f"[nightly] {size.index_docs:,}: as fresh CLI processes: {json.dumps(cli)}")
    report = min(nightly, key=lambda t: t[1])[0]
    full_report = min(full, key=lambda t: t[1])[0]
    match_report = min(matches, key=lambda t: t[1])[0]
    nightly_wall, full_wall = min(t[1] for t in nightly), min(t[1] for t in full)
    nightly_cpu, full_cpu = _best_cpu(nightly), _best_cpu(full)
    input_bytes = _dir_bytes(paths["base"]) + _dir_bytes(paths["new"])
    return {
        "index_docs": size.index_docs,
        "new_docs": size.new_docs,
        "repeats": size.repeats,
        "generate_seconds": round(generate_seconds, 1),
        "plain_work_seconds": plain["wall_seconds"],
        "build_work_seconds": build["wall_seconds"],
        "build_ratio": _ratio(build["wall_seconds"], plain["wall_seconds"]),
        "build_seconds": round(build_wall, 1),
        "build_cpu_seconds": round(build_cpu, 1) if build_cpu else None,
        "nightly_work_seconds": report["wall_seconds"],
        "full_work_seconds": full_report["wall_seconds"],
        "match_work_seconds": match_report["wall_seconds"],
        "match_vs_night": _ratio(match_report["wall_seconds"], report["wall_seconds"]),
        "work_speedup": _ratio(full_report["wall_seconds"], report["wall_seconds"]),
        "nightly_seconds": round(nightly_wall, 1),
        "full_seconds": round(full_wall, 1),
        "speedup": _ratio(full_wall, nightly_wall),
        "nightly_cpu_seconds": round(nightly_cpu, 1) if nightly_cpu else None,
        "full_cpu_seconds": round(full_cpu, 1) if full_cpu else None,
        "cpu_speedup": _ratio(full_cpu, nightly_cpu),
        "all_nightly_seconds": [round(t[1], 1) for t in nightly],
        "all_full_seconds": [round(t[1], 1) for t in full],
        "load_before": load_before,
        "load_after": one_minute_load(),
        "nightly_stage_seconds": report["stage_seconds"],
        "nightly_counts": report["counts"],
        "index_bytes": _dir_bytes(str(index_dir)),
        "input_bytes": input_bytes,
        "cross_day_recall": cross_day_recall(
            session, str(index_dir), str(root / "out-full" / "pairs"), paths["new"], config
        ),
        "plain_seconds": round(plain_wall, 1),
        "cli": cli,
    }


def time_nightly_and_full(
    session: SparkSession,
    config: DedupeConfig,
    size: NightlySize,
    paths: dict[str, str],
    echo: Callable[[str], None],
) -> tuple[list[Timing], list[Timing], list[Timing]]:
    """``size.repeats`` timings of the nightly run (the index restored before each repeat), of
    the full rerun, and of ``neardup match`` of the night's batch against the index before it."""
    root = size.root
    index_dir, saved = root / "index", root / "index-before-nightly"
    nightly: list[Timing] = []
    full: list[Timing] = []
    matches: list[Timing] = []
    for attempt in range(size.repeats):
        if attempt:
            shutil.rmtree(index_dir)
            shutil.copytree(saved, index_dir)
        # the same batch matched against the same index first (it leaves the index as it is)
        matches.append(
            timed(run_match, session, paths["new"], str(root / "out-match"), str(index_dir),
                  config, True)
        )  # fmt: skip
        nightly.append(
            timed(
                run_incremental,
                session,
                paths["new"],
                str(root / "out-nightly"),
                str(index_dir),
                config,
                True,
            )
        )
        full.append(timed(full_run, session, paths["all"], str(root / "out-full"), config))
        echo(
            f"[nightly] {size.index_docs:,}: {size.new_docs:,} new documents in "
            f"{nightly[-1][1]:.1f} s (matched in {matches[-1][1]:.1f} s), full rerun of "
            f"{size.index_docs + size.new_docs:,} in {full[-1][1]:.1f} s"
        )
    return nightly, full, matches


def cross_day_recall(
    session: SparkSession, index_dir: str, full_pairs: str, new_input: str, config: DedupeConfig
) -> float | None:
    """Of the full rerun's pairs joining a new document to an indexed one, the fraction whose
    two documents the index (after the night) puts in one cluster; None without such pairs."""
    new_ids = ds.dataset(new_input).to_table(columns=[config.id_col]).column(config.id_col)
    pairs = ds.dataset(full_pairs).to_table(columns=[DOC_A, DOC_B])
    new_a, new_b = pc.is_in(pairs.column(DOC_A), new_ids), pc.is_in(pairs.column(DOC_B), new_ids)
    across = pairs.filter(pc.xor(new_a, new_b))
    if not across.num_rows:
        return None
    rows = Index.open(session, index_dir).docs_rows()
    assert rows is not None  # the night was indexed
    clusters = to_arrow(latest_rows(rows).select(DOC_ID, CLUSTER_ID))
    ids, cluster_ids = clusters.column(DOC_ID), clusters.column(CLUSTER_ID)
    of_a = pc.take(cluster_ids, pc.index_in(across.column(DOC_A), ids))
    of_b = pc.take(cluster_ids, pc.index_in(across.column(DOC_B), ids))
    joined = pc.sum(pc.fill_null(pc.equal(of_a, of_b), False).cast("int64")).as_py() or 0
    return round(joined / across.num_rows, 4)


def full_run(session: SparkSession, input_path: str, output: str, config: DedupeConfig) -> Any:
    """A timed full run: started afresh. A bench killed midway leaves a run's kept stages in
    OUTPUT's staging, and the next bench's run of the same command resumed from them (a 1M
    full rerun "took" 48.6 s instead of ~100)."""
    return run(session, input_path, output, config, overwrite=True, resume=False)


def timed(action: Callable[..., Any], *args: Any) -> Timing:
    """``(result, wall seconds, CPU seconds of this process tree)`` of ``action(*args)``."""
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    result = action(*args)
    wall, cpu1 = time.perf_counter() - t0, tree_cpu_seconds()
    return result, wall, (cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None)


def _best_cpu(timings: list[Timing]) -> float | None:
    cpus = [t[2] for t in timings]
    return min(c for c in cpus if c is not None) if None not in cpus else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def _dir_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


@dataclass(frozen=True)
class Series:
    """Nights one after the other on one index: its directory and what it runs."""

    root: Path
    index_docs: int
    nights: int
    new_docs: int
    seed: int
    mean_words: int


def bench_series(
    session: SparkSession, config: DedupeConfig, series: Series, echo: Callable[[str], None]
) -> dict[str, Any]:
    """Index ``base/`` (``index_docs``), then run ``nights`` nights of ``new_docs`` each
    against it, without compaction; the work seconds of every night and how they grew."""
    parts = {"base": (0, series.index_docs)}
    for night in range(series.nights):
        start = series.index_docs + night * series.new_docs
        parts[f"night-{night + 1:03d}"] = (start, start + series.new_docs)
    docs = series.index_docs + series.nights * series.new_docs
    paths = ensure_cut_corpus(series.root / "corpus", docs, parts, series.seed, series.mean_words)
    index_dir = series.root / "index"
    shutil.rmtree(index_dir, ignore_errors=True)
    build = run_incremental(
        session, paths["base"], str(series.root / "out-build"), str(index_dir), config, True
    )
    echo(f"[series] {series.index_docs:,} indexed in {build['wall_seconds']:.1f} s")
    nights: list[dict[str, Any]] = []
    for night in range(1, series.nights + 1):
        name = f"night-{night:03d}"
        report = run_incremental(
            session, paths[name], str(series.root / "out-night"), str(index_dir), config, True
        )
        nights.append(
            {
                "night": night,
                "work_seconds": report["wall_seconds"],
                "index_docs": report["index"]["documents"],
                "segments": report["index"]["segments"],
                "stage_seconds": report["stage_seconds"],
            }
        )
        echo(
            f"[series] night {night}: {report['wall_seconds']:.1f} s "
            f"({report['index']['documents']:,} documents indexed)"
        )
    seconds = [n["work_seconds"] for n in nights]
    return {
        "index_docs": series.index_docs,
        "new_docs": series.new_docs,
        "nights": nights,
        "first_seconds": seconds[0] if seconds else None,
        "last_seconds": seconds[-1] if seconds else None,
        "last_over_first": _ratio(seconds[-1], seconds[0]) if seconds else None,
        "first3_mean": round(sum(seconds[:3]) / len(seconds[:3]), 2) if seconds else None,
        "last3_mean": round(sum(seconds[-3:]) / len(seconds[-3:]), 2) if seconds else None,
        "index_bytes": _dir_bytes(str(index_dir)),
    }
