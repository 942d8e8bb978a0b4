"""The benchmark's corpora, generated once and reused while their marker names the same size,
seed and layout.

* the main table: one corpus per size, ``neardup generate WORKDIR/corpora/docs-N-seed-S --docs N
  --seed S`` (run as a child process), with its truth pairs;
* the nightly case: one generated corpus of ``N + M`` documents cut into ``base/`` (the first
  ``N``, the index), ``new/`` (the next ``M``) and ``all/`` (both, hard links).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from neardup_spark.bench.processes import child_env, neardup_command
from neardup_spark.quality.generate import ROW_GROUP_ROWS, generate_corpus

CORPUS_MARKER = "bench-corpus.json"
NIGHTLY_CORPUS_MARKER = "corpus.json"


@dataclass(frozen=True)
class Corpus:
    """A generated corpus of ``docs`` documents: ``root/corpus`` (Parquet: id, text) and
    ``root/truth`` (the planted pairs with their exact Jaccard)."""

    docs: int
    root: Path

    @property
    def corpus(self) -> Path:
        """The documents."""
        return self.root / "corpus"

    @property
    def truth(self) -> Path:
        """The planted pairs (doc_a, doc_b, jaccard)."""
        return self.root / "truth"


def ensure_corpus(workdir: Path, docs: int, seed: int, timeout: float | None) -> dict[str, Any]:
    """Generate ``docs`` documents once (``neardup generate``); reuse a matching one."""
    root = workdir / "corpora" / f"docs-{docs}-seed-{seed}"
    marker = root / CORPUS_MARKER
    # The layout is part of what is measured (input splits): a corpus written otherwise is redone.
    wanted = {"docs": docs, "seed": seed, "row_group_rows": ROW_GROUP_ROWS}
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(marker.read_text())
        same = {k: found.get(k) for k in wanted} == wanted
        if same and (root / "corpus").is_dir() and (root / "truth").is_dir():
            return {"path": str(root), "docs": docs, "reused": True, "seconds": 0.0}
    command = [*neardup_command(), "generate", str(root), "--docs", str(docs)]
    command += ["--seed", str(seed), "--overwrite"]
    started = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=child_env(), check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"`{shlex.join(command)}` failed:\n{done.stderr[-2000:]}")
    seconds = time.perf_counter() - started
    marker.write_text(json.dumps({**wanted, "generated_seconds": round(seconds, 2)}) + "\n")
    return {"path": str(root), "docs": docs, "reused": False, "seconds": round(seconds, 2)}


def ensure_nightly_corpus(
    root: Path, index_docs: int, new_docs: int, seed: int, mean_words: int
) -> dict[str, str]:
    """``base/`` (the first ``index_docs`` rows), ``new/`` (the next ``new_docs``) and ``all/``
    (both, hard links) of one generated corpus, reused while its marker matches."""
    parts = {"base": (0, index_docs), "new": (index_docs, index_docs + new_docs)}
    paths = ensure_cut_corpus(root, index_docs + new_docs, parts, seed, mean_words)
    all_dir = root / "all"
    if not all_dir.exists():
        all_dir.mkdir()
        for name in ("base", "new"):
            for file in sorted(Path(paths[name]).glob("*.parquet")):
                os.link(file, all_dir / f"{name}-{file.name}")
    return {**paths, "all": str(all_dir)}


def ensure_cut_corpus(
    root: Path, docs: int, parts: dict[str, tuple[int, int]], seed: int, mean_words: int
) -> dict[str, str]:
    """One generated corpus of ``docs`` documents cut into directories (``parts``: name ->
    rows [start, stop)), written as ``neardup generate`` writes (row groups = input splits);
    reused while its marker matches."""
    spec = {
        "docs": docs,
        "parts": {name: list(rows) for name, rows in parts.items()},
        "seed": seed,
        "mean_words": mean_words,
        "row_group_rows": ROW_GROUP_ROWS,
    }
    marker = root / NIGHTLY_CORPUS_MARKER
    paths = {name: str(root / name) for name in parts}
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return paths
    shutil.rmtree(root, ignore_errors=True)
    table, _ = generate_corpus(docs, seed=seed, mean_words=mean_words)
    step = 20_000
    for name, (start, stop) in parts.items():
        Path(paths[name]).mkdir(parents=True)
        for i, lo in enumerate(range(start, stop, step)):
            file = Path(paths[name]) / f"part-{i:05d}.parquet"
            pq.write_table(
                table.slice(lo, min(step, stop - lo)), file, row_group_size=ROW_GROUP_ROWS
            )
    marker.write_text(json.dumps(spec))
    return paths
