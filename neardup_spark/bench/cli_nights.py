"""Nights as cron runs them: the nightly case's night and full rerun, each again as a fresh
``neardup dedupe`` process (a new JVM, new Python workers, kernels loaded from numba's cache,
the JVM's first queries planned cold), next to the warm-session figures of
:mod:`neardup_spark.bench.nightly`.

For each, the run's *work* seconds (its report: reading the input to the committed output),
the *whole process* (from ``Popen`` to exit) and what the process paid before its work began
(*start*: interpreter, imports, JVM start; printed by the command as its Spark start-up, plus
the rest up to the work). The night runs against a copy of the index as it was before the
warm night, so both nights add the same batch to the same index; it runs twice (the faster
counts), the full rerun once (a minute or more, its noise a smaller share).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from neardup_spark.bench.processes import child_env, neardup_command, run_measured

SPARK_START = re.compile(r"\(\+ ([0-9.]+) s Spark start-up\)")
CLI_TIMEOUT = 3600.0
# CLI nights run per size, each on a fresh copy of the index; the faster is reported (one night of
# 10,000 against 300,000 took 8.2 s of work in a bench, 3.5-4.1 s in three runs just after).
CLI_NIGHTS = 2


def cli_run(args: list[str], output: Path, log: Path, master: str) -> dict[str, Any]:
    """``neardup dedupe ARGS OUTPUT --master MASTER --overwrite`` in a fresh process: work,
    whole-process and start-up seconds, or the error."""
    shutil.rmtree(output, ignore_errors=True)
    command = [*neardup_command(), "dedupe", *args, str(output), "--master", master]
    measured = run_measured([*command, "--overwrite"], log, CLI_TIMEOUT, child_env())
    if measured.returncode != 0:
        return {"error": f"exit {measured.returncode}; see {log}"}
    report = json.loads((output / "report.json").read_text())
    found = SPARK_START.search(log.read_text(errors="replace"))
    work = float(report["wall_seconds"])
    return {
        "work_seconds": work,
        "process_seconds": round(measured.wall_seconds, 2),
        "spark_start_seconds": float(found.group(1)) if found else None,
        "start_seconds": round(measured.wall_seconds - work, 2),
        "stage_seconds": report.get("stage_seconds", {}),
    }


def cli_nights(
    root: Path, paths: dict[str, str], index_before_night: Path, master: str
) -> dict[str, Any]:
    """The night (``new/`` against a copy of ``index_before_night``; the faster of
    :data:`CLI_NIGHTS`, each on a fresh copy) and the full rerun (``all/``), each as a fresh CLI
    process; with the ratios full / night."""
    index = root / "index-cli"
    nights: list[dict[str, Any]] = []
    try:
        for _ in range(CLI_NIGHTS):
            shutil.rmtree(index, ignore_errors=True)
            shutil.copytree(index_before_night, index)
            nights.append(
                cli_run(
                    [paths["new"], "--index", str(index)],
                    root / "out-cli-night",
                    root / "cli-night.log",
                    master,
                )
            )
        # --no-resume: the kept stages of a killed bench's run must not be resumed
        full = cli_run(
            [paths["all"], "--no-resume"], root / "out-cli-full", root / "cli-full.log", master
        )
    finally:
        shutil.rmtree(index, ignore_errors=True)
    failed = [n for n in nights if "error" in n]
    night = failed[0] if failed else min(nights, key=lambda n: n["process_seconds"])
    if not failed:
        night["all_process_seconds"] = [n["process_seconds"] for n in nights]
    out: dict[str, Any] = {"night": night, "full": full}
    if "error" not in night and "error" not in full:
        out["work_ratio"] = round(full["work_seconds"] / night["work_seconds"], 2)
        out["process_ratio"] = round(full["process_seconds"] / night["process_seconds"], 2)
    return out


def format_cli_nights(rows: list[dict[str, Any]]) -> str:
    """Lines of the nightly page: each size's CLI night against its CLI full rerun."""
    lines = []
    for row in rows:
        cli = row.get("cli")
        if not cli:
            continue
        night, full = cli["night"], cli["full"]
        where = f"- {row['index_docs']:,} indexed, {row['new_docs']:,} new"
        if "error" in night or "error" in full:
            lines.append(f"{where}: a CLI run failed: {night.get('error') or full.get('error')}")
            continue
        spark_start = night["spark_start_seconds"] or 0.0
        runs = night.get("all_process_seconds", [])
        faster = f"the faster of {' and '.join(f'{t:.1f}' for t in runs)} s; " if runs else ""
        lines.append(
            f"{where}: night work {night['work_seconds']:.1f} s, process "
            f"{night['process_seconds']:.1f} s ({faster}before its work: "
            f"{night['start_seconds']:.1f} s, Spark start-up {spark_start:.1f} s of it); full "
            f"rerun work {full['work_seconds']:.1f} s, process {full['process_seconds']:.1f} s; "
            f"the night is 1/{cli['work_ratio']:.1f} of the rerun's work, "
            f"1/{cli['process_ratio']:.1f} of its process"
        )
    return "\n".join(lines)
