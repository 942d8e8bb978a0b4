"""The benchmark's Markdown: the main table (one line per size and row, aligned by
:func:`neardup_spark.quality.tables.markdown_table`), the neardup stage times, the machine and
settings lines, and the nightly case's table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neardup_spark.bench.cli_nights import format_cli_nights
from neardup_spark.bench.ratios import TIME_REFERENCES, growth_exponent
from neardup_spark.bench.settings import BenchSettings, bench_command
from neardup_spark.quality.tables import markdown_table

GB = 1024**3


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


MAIN_HEADERS = (
    "docs",
    "row",
    "wall s",
    "JVM start s",
    "work s",
    "docs/s",
    "x floor",
    "x mllib",
    "x mllib wall",
    "x rensa wall",
    "growth",
    "peak GB",
    "pairs",
    "recall",
    "precision",
    "status",
)


def _status(row: dict[str, Any]) -> str:
    status = str(row.get("status", "?"))
    if status == "ok":
        return status
    reason = str(row.get("error") or "").replace("|", "/").splitlines()
    return f"{status}: {reason[0][:70]}" if reason else status


def main_table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per (size, row): the benchmark table."""
    cells = []
    for r in rows:
        peak = r.get("peak_rss_bytes")
        cells.append(
            [
                _fmt(r["docs"]),
                str(r["row"]),
                _fmt(r.get("wall_seconds"), 1),
                _fmt(r.get("spark_start_seconds"), 1),
                _fmt(r.get("work_seconds"), 1),
                _fmt(None if r.get("docs_per_second") is None else round(r["docs_per_second"])),
                _fmt(r.get("vs_floor")),
                _fmt(r.get("vs_mllib")),
                _fmt(r.get("vs_mllib_wall")),
                _fmt(r.get("vs_rensa_wall")),
                _fmt(r.get("growth_exponent")),
                _fmt(None if not peak else peak / GB),
                _fmt(r.get("pairs")),
                _fmt(r.get("recall"), 4),
                _fmt(r.get("precision"), 4),
                _status(r),
            ]
        )
    return markdown_table(MAIN_HEADERS, cells, right=set(range(2, 14)) | {0})


def stage_table(rows: Sequence[dict[str, Any]]) -> str:
    """``report.json`` ``stage_seconds`` of the neardup rows, one column per stage; after a
    row's second and later sizes, each stage's growth exponent from the row's previous size."""
    with_stages = [r for r in rows if r.get("stage_seconds")]
    if not with_stages:
        return ""
    stages: list[str] = []
    for r in with_stages:
        stages += [s for s in r["stage_seconds"] if s not in stages]
    headers = ["docs", "row", *stages, "sum", "work s"]

    def timings(r: dict[str, Any]) -> list[float | None]:
        seconds = r["stage_seconds"]
        total = float(sum(seconds.values()))
        return [*(seconds.get(s) for s in stages), total, r.get("work_seconds")]

    cells = []
    for i, r in enumerate(with_stages):
        cells.append([_fmt(r["docs"]), str(r["row"]), *(_fmt(t, 1) for t in timings(r))])
        before = [p for p in with_stages[:i] if p["row"] == r["row"] and p["docs"] < r["docs"]]
        if before:
            n1, t1 = before[-1]["docs"], timings(before[-1])
            exponents = [
                growth_exponent(n1, a, r["docs"], b) for a, b in zip(t1, timings(r), strict=True)
            ]
            cells.append(
                ["", f"growth from {n1:,}", *("-" if e is None else f"{e:.2f}" for e in exponents)]
            )
    return markdown_table(headers, cells, right={0, *range(2, len(headers))})


SCALE_HEADERS = (
    "docs",
    "row",
    "work s",
    "growth",
    "peak GB",
    "input GB",
    "staging peak GB",
    "Spark local peak GB",
    "outputs GB",
    "shuffle written GB",
    "spilled GB",
    "shuffle B/doc",
    "docs/core-hour",
    "peak GB/core",
    "same",
    "resumed",
)


def _gb(value: Any) -> str:
    return "-" if value is None else f"{value / GB:,.2f}"


def scale_table(rows: Sequence[dict[str, Any]]) -> str:
    """The neardup rows' disk, shuffle and sizing figures (``--scale-metrics``), whether a
    variant row gave neardup-minhash's clusters and pairs, and what a resumed run read back."""
    shown = [r for r in rows if r.get("scale") or "same_as_minhash" in r]
    if not shown:
        return ""
    cells = []
    for r in shown:
        m = r.get("scale", {})
        resumed = r.get("resumed_stages")
        share = r.get("rerun_share")
        cells.append(
            [
                _fmt(r["docs"]),
                str(r["row"]),
                _fmt(r.get("work_seconds"), 1),
                _fmt(r.get("growth_exponent")),
                _gb(r.get("peak_rss_bytes")),
                _gb(m.get("input_bytes")),
                _gb(m.get("staging_peak_bytes")),
                _gb(m.get("spark_local_peak_bytes")),
                _gb(m.get("output_bytes")),
                _gb(m.get("shuffle_write_bytes")),
                _gb(m.get("disk_spill_bytes")),
                _fmt(None if not m else round(m["shuffle_bytes_per_doc"])),
                _fmt(None if not m else round(m["docs_per_core_hour"])),
                _gb(m.get("peak_bytes_per_core")),
                _fmt(r.get("same_as_minhash")),
                "-"
                if resumed is None
                else ", ".join(resumed) + ("" if share is None else f" ({share:.0%} of fresh)"),
            ]
        )
    return markdown_table(SCALE_HEADERS, cells, right=set(range(2, 14)) | {0})


def machine_line(machine: dict[str, Any]) -> str:
    ram = machine.get("ram_bytes")
    load = machine.get("load_average")
    return (
        f"Machine: {machine.get('cpu_model')}, {machine.get('cores')} cores, "
        f"{_fmt(None if ram is None else ram / GB, 1)} GiB RAM; Python {machine.get('python')}, "
        f"Spark {machine.get('spark')}, Java {machine.get('java')}, "
        f"datasketch {machine.get('datasketch')}, rensa {machine.get('rensa')}; "
        f"{machine.get('date')}" + (f"; load average at start {load}" if load else "")
    )


def _kernels_note(kernels: dict[str, float] | None) -> str:
    """What a fresh install's first run pays for its kernels (``neardup warmup`` pays it at
    install time instead)."""
    if not kernels:
        return ""
    return (
        f" Kernels: {kernels['compile']:.1f} s to compile on a fresh install (numba's cache "
        f"empty; `make setup` / `neardup warmup` pay it once), {kernels['cached']:.1f} s from "
        "the cache."
    )


def format_markdown(results: dict[str, Any], heading: bool = True) -> str:
    """The whole Markdown report: machine line, settings, the table, neardup stage times
    (without the heading and machine line: the body of a :func:`docs_page`)."""
    s = results.get("settings", {})
    head = ["## neardup bench", "", machine_line(results.get("machine", {})), ""]
    lines = [
        *(head if heading else []),
        f"Settings: master {s.get('master')}, threshold {s.get('threshold')}, corpus seed "
        f"{s.get('seed')}, sizes {', '.join(f'{n:,}' for n in s.get('docs', []))}; "
        f"total bench wall {_fmt(results.get('total_seconds'), 0)} s; JVM class archive "
        f"{'on, for every Spark row' if s.get('jvm_archive') else 'off'}."
        + _kernels_note(s.get("kernels")),
        "",
        main_table(results.get("rows", [])),
        "",
        "docs/s = docs / work s (JVM start excluded); x floor / x mllib = docs/s over the "
        "floor / spark-mllib row's at the same size; x mllib wall = the same on whole-process "
        "wall s; x rensa wall = the same against the rensa row (above 1: neardup's whole process "
        "is faster than rensa's unverified run); growth = log(t2/t1)/log(n2/n1) of work s from "
        "the previous size; peak GB = max "
        "summed RSS of the row's process tree (JVM and Python workers included); recall = truth "
        "pairs with J >= threshold connected by the found pairs; precision = found pairs with "
        "exact J >= threshold.",
    ]
    boilerplate = [
        f"- {r['docs']:,} {r['row']}: work {_fmt(r['time_vs'])} x {TIME_REFERENCES[r['row']]}'s"
        for r in results.get("rows", [])
        if r.get("time_vs") is not None
    ]
    if boilerplate:
        lines += ["", "Work seconds against a reference row:", *boilerplate]
    stages = stage_table(results.get("rows", []))
    if stages:
        lines += [
            "",
            "neardup stage seconds (report.json), with each stage's growth exponent between sizes:",
            "",
            stages,
        ]
    scale = scale_table(results.get("rows", []))
    if scale:
        lines += [
            "",
            "Disk, shuffle and sizing (staging = OUTPUT/_staging: kept stage results, "
            "checkpoints, staged outputs; Spark local = shuffle and spill files; shuffle and "
            "spill from the event log; docs/core-hour = docs / (work s x cores / 3600); same "
            "= clusters and pairs equal neardup-minhash's; resumed = stages a rerun read back "
            "after a SIGKILL, its work s against the fresh run's):",
            "",
            scale,
        ]
    notes = [
        f"- {r['docs']:,} {r['row']}: {r['note']}" for r in results.get("rows", []) if r.get("note")
    ]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def format_nightly(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of :func:`neardup_spark.bench.nightly.bench_nightly` rows: work seconds
    (the runs' reports) of a night and of a full rerun, the index build against a plain run of
    the same documents, the index's size against its input's, the cross-day recall (the full
    rerun's new-to-indexed pairs the night clustered together)."""
    headers = [
        "index docs",
        "new docs",
        "night work s",
        "full rerun work s",
        "speedup",
        "night growth",
        "match work s",
        "match / night",
        "plain run s",
        "index build s",
        "build / plain",
        "index MiB",
        "input MiB",
        "index / input",
        "cross-day recall",
        "night CPU s",
        "full CPU s",
        "load",
    ]
    cells = []
    for r in rows:
        index_mib, input_mib = r["index_bytes"] / 2**20, r.get("input_bytes", 0) / 2**20
        cells.append(
            [
                f"{r['index_docs']:,}",
                f"{r['new_docs']:,}",
                _num(r.get("nightly_work_seconds")),
                _num(r.get("full_work_seconds")),
                _num(r.get("work_speedup"), "x"),
                _num(r.get("nightly_growth"), "x", digits=2),
                _num(r.get("match_work_seconds")),
                _num(r.get("match_vs_night"), "x", digits=2),
                _num(r.get("plain_work_seconds")),
                _num(r.get("build_work_seconds")),
                _num(r.get("build_ratio"), "x", digits=2),
                f"{index_mib:,.0f}",
                f"{input_mib:,.0f}",
                _num(index_mib / input_mib if input_mib else None, "x", digits=2),
                _num(r.get("cross_day_recall"), digits=4),
                _num(r.get("nightly_cpu_seconds")),
                _num(r.get("full_cpu_seconds")),
                f"{_num(r.get('load_before'), digits=2)}-{_num(r.get('load_after'), digits=2)}",
            ]
        )
    return markdown_table(headers, cells, right=set(range(len(headers) - 1)))


def _num(value: float | None, suffix: str = "", digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}{suffix}"


def format_series(series: dict[str, Any]) -> str:
    """The series of nights on one index: a summary line and each night's work seconds."""
    nights = series["nights"]
    head = (
        f"{len(nights)} nights of {series['new_docs']:,} documents on an index of "
        f"{series['index_docs']:,} (no compaction): first {_num(series['first_seconds'])} s, "
        f"last {_num(series['last_seconds'])} s ({_num(series['last_over_first'], 'x', 2)}); "
        f"mean of the first 3 {_num(series['first3_mean'], digits=2)} s, of the last 3 "
        f"{_num(series['last3_mean'], digits=2)} s; index {series['index_bytes'] / 2**20:,.0f} "
        "MiB at the end"
    )
    cells = [
        [str(n["night"]), f"{n['index_docs']:,}", str(n["segments"]), _num(n["work_seconds"])]
        for n in nights
    ]
    table = markdown_table(
        ["night", "documents after", "segments", "work s"], cells, right={0, 1, 2, 3}
    )
    return head + "\n\n" + table


def nightly_markdown(results: dict[str, Any]) -> str:
    """``nightly.md``: a title line, the :func:`format_nightly` table, the series, and the
    error of a failed nightly case."""
    text = "Nightly: new documents against an index vs a full rerun over index + new\n\n"
    text += format_nightly(results["rows"]) + "\n"
    cli = format_cli_nights(results["rows"])
    if cli:
        text += "\nThe same nights as cron starts them (a fresh `neardup dedupe` process each):\n\n"
        text += cli + "\n"
    if results.get("series"):
        text += "\n" + format_series(results["series"]) + "\n"
    if results.get("error"):
        text += f"\nfailed: {results['error']}\n"
    return text


MAIN_PAGE = "bench-main.md"
NIGHTLY_PAGE = "bench-nightly.md"


def docs_page(title: str, machine: dict[str, Any], command: str, body: str) -> str:
    """A page of the documentation site (``--docs-out``): ``title``, when and where it was
    measured (date, CPU model, cores, RAM, versions), the command that regenerates it, then
    ``body`` (the bench's own Markdown)."""
    return f"### {title}\n\n{machine_line(machine)}.\n\nCommand: `{command}`\n\n{body.strip()}\n"


def write_page(
    path: Path, title: str, settings: BenchSettings, machine: dict[str, Any], body: str
) -> None:
    """A documentation page of the tables at ``path`` (``--docs-out``): :func:`docs_page` with
    the command that gives ``settings``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(docs_page(title, machine, bench_command(settings), body))
