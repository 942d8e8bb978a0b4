"""``neardup bench``: neardup side by side with the hashing floor, Spark MLlib and datasketch,
then the nightly case (:mod:`neardup_spark.bench.nightly`).

For each size (``--docs 10000,30000,100000`` by default; ``--docs 1000000`` is an optional
size, spark-mllib and datasketch are skipped above their maximum, 100,000 by default), the
corpus is generated once (:mod:`neardup_spark.bench.corpora`), every row runs in its own
measured process (:mod:`neardup_spark.bench.rows`, :mod:`neardup_spark.bench.children`), then
the rows are scored against the truth (:mod:`neardup_spark.bench.scoring`) and compared with
each other (:mod:`neardup_spark.bench.ratios`). ``results.json`` is rewritten after every row;
``results.md`` (:mod:`neardup_spark.bench.tables`) at the end. The JVM class archive is built
first so every Spark row maps the same one. A failed or timed-out row is recorded with its
error and the bench goes on; the exit status is 1 when one did.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neardup_spark.bench.archive_build import ensure_archive, kernel_compile_seconds
from neardup_spark.bench.corpora import Corpus, ensure_corpus
from neardup_spark.bench.machine import machine_info
from neardup_spark.bench.nightly import run_nightly
from neardup_spark.bench.ratios import derive
from neardup_spark.bench.rows import run_row
from neardup_spark.bench.scoring import score_rows
from neardup_spark.bench.settings import BenchSettings
from neardup_spark.bench.tables import MAIN_PAGE, format_markdown, write_page
from neardup_spark.bench.variants import compare_variants


def run_bench(settings: BenchSettings, echo: Callable[[str], None]) -> int:
    """Run the benchmark ``settings`` describe, ``echo`` receiving its progress lines and
    tables: the main table, then the nightly case (or only one of them). 0 when every row and
    run finished, 1 when one failed or timed out (the tables are written either way)."""
    if settings.nightly_only:
        return run_nightly(settings, echo)
    failed = MainTable(settings, echo).run()
    nightly_status = 0 if settings.no_nightly else run_nightly(settings, echo)
    return 1 if failed or nightly_status else 0


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as indented JSON at ``path``, replaced in one step (never half written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def progress_line(record: dict[str, Any]) -> str:
    """``[bench] DOCS ROW: status, wall .. s, work .. s (error)`` once a row finished."""
    return (
        f"[bench] {record['docs']:,} {record['row']}: {record['status']}"
        + (f", wall {record['wall_seconds']:.1f} s" if "wall_seconds" in record else "")
        + (f", work {record['work_seconds']:.1f} s" if "work_seconds" in record else "")
        + (f" ({record['error']})" if record.get("error") else "")
    )


class MainTable:
    """The main table of one benchmark: its results (``results.json``), filled size by size."""

    def __init__(self, settings: BenchSettings, echo: Callable[[str], None]) -> None:
        self.settings = settings
        self.echo = echo
        self.workdir = Path(settings.workdir)
        self.results_path = Path(settings.results or self.workdir / "results.json")
        self.markdown_path = Path(settings.markdown or self.workdir / "results.md")
        self.started = time.perf_counter()
        self.results: dict[str, Any] = {
            "machine": machine_info(),
            "settings": {
                "docs": list(settings.docs),
                "rows": list(settings.rows),
                "seed": settings.seed,
                "threshold": settings.threshold,
                "master": settings.master,
                "timeout": settings.timeout,
                "mllib_max_docs": settings.mllib_max_docs,
                "datasketch_max_docs": settings.datasketch_max_docs,
                "variant_max_docs": settings.variant_max_docs,
                "scale_metrics": settings.scale_metrics,
                "workdir": str(self.workdir),
            },
            "corpora": [],
            "rows": [],
        }

    def run(self) -> bool:
        """Every size, then ``results.json`` and ``results.md``; True when a row failed or
        timed out."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.results["settings"]["jvm_archive"] = ensure_archive()
        self.results["settings"]["kernels"] = (
            None if self.settings.no_compile_timing else kernel_compile_seconds(self.workdir)
        )
        for docs in self.settings.docs:
            self.bench_size(docs)
        derive(self.results["rows"])
        self.save()
        text = format_markdown(self.results)
        self.markdown_path.parent.mkdir(parents=True, exist_ok=True)
        self.markdown_path.write_text(text)
        self.echo(text)
        self.echo(f"[bench] wrote {self.results_path} and {self.markdown_path}")
        if self.settings.docs_out:
            page = Path(self.settings.docs_out) / MAIN_PAGE
            body = format_markdown(self.results, heading=False)
            write_page(page, "Main table", self.settings, self.results["machine"], body)
            self.echo(f"[bench] wrote {page}")
        return any(r.get("status") in ("failed", "timeout") for r in self.results["rows"])

    def save(self) -> None:
        """``results.json`` as it stands, with the time spent so far."""
        self.results["total_seconds"] = round(time.perf_counter() - self.started, 1)
        write_json(self.results_path, self.results)

    def bench_size(self, docs: int) -> None:
        """The corpus of ``docs`` documents, each row on it, then their scores and ratios."""
        all_rows: list[dict[str, Any]] = self.results["rows"]
        try:
            info = ensure_corpus(self.workdir, docs, self.settings.seed, self.settings.timeout)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            self.results["corpora"].append({"docs": docs, "error": str(exc)})
            all_rows += [
                {"docs": docs, "row": row, "status": "failed", "error": "no corpus"}
                for row in self.settings.rows
            ]
            return
        self.results["corpora"].append(info)
        self.echo(
            f"[bench] {docs:,} documents: corpus {'reused' if info['reused'] else 'generated'} "
            f"({info['seconds']:.1f} s)"
        )
        corpus = Corpus(docs=docs, root=Path(info["path"]))
        size_rows: list[dict[str, Any]] = []
        for row in self.settings.rows:
            record = run_row(row, corpus, self.workdir, self.settings)
            size_rows.append(record)
            all_rows.append(record)
            self.echo(progress_line(record))
            self.save()
        compare_variants(size_rows)
        scoring = time.perf_counter()
        score_rows(size_rows, corpus, self.settings.threshold)
        self.results.setdefault("scoring_seconds", {})[str(docs)] = round(
            time.perf_counter() - scoring, 1
        )
        derive(all_rows)
        self.save()
