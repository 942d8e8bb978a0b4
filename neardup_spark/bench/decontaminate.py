"""``make bench-decontaminate``: what decontaminating a corpus costs against a dedupe's
per-document pass over the same corpus (the issue's target: at most 1.5x).

``python -m neardup_spark.bench.decontaminate [--docs N] [--items M] [--workdir DIR]``:

1. the corpus: ``neardup generate`` of N documents (default 1,000,000), generated once and
   reused like the main bench's (:func:`~neardup_spark.bench.corpora.ensure_corpus`);
2. the reference: M items (default 20,000) in one Parquet file, made once: a tenth are passages
   of 30 to 60 consecutive words taken from corpus documents (leaks: each is found), the rest
   the first 30 to 60 words of documents generated with another seed (not in the corpus);
3. ``neardup dedupe CORPUS`` then ``neardup decontaminate CORPUS --reference REF``, one after
   the other, each its own process; their ``report.json``'s ``stage_seconds``: dedupe's
   ``sketch`` (its per-document pass) against decontaminate's ``corpus`` (its whole corpus
   pass: hits, common n-grams, matches, clean/ written) and each of its steps.

Prints one line per figure and writes them to ``WORKDIR/decontaminate-N.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from neardup_spark.bench.corpora import ensure_corpus
from neardup_spark.bench.processes import child_env, neardup_command, run_measured
from neardup_spark.quality.generate import generate_corpus

DEFAULT_DOCS = 1_000_000
DEFAULT_ITEMS = 20_000
# Share of the reference's items taken from the corpus (found), the rest from elsewhere.
LEAKED_SHARE = 0.1
PASSAGE_WORDS = (30, 60)
REFERENCE_MARKER = "reference.json"
TARGET_RATIO = 1.5


def passage(rng: random.Random, text: str) -> str:
    """30 to 60 consecutive words of ``text`` (all of it when shorter)."""
    words = text.split()
    size = rng.randint(*PASSAGE_WORDS)
    at = rng.randrange(max(len(words) - size, 0) + 1)
    return " ".join(words[at : at + size])


def leaked_texts(corpus: Path, count: int, rng: random.Random) -> list[str]:
    """``count`` passages of distinct documents, from row groups spread over the corpus."""
    files = sorted(corpus.glob("*.parquet"))
    groups = [(f, g) for f in files for g in range(pq.ParquetFile(f).num_row_groups)]
    chosen = rng.sample(groups, min(len(groups), max(1, count // 50)))
    texts: list[str] = []
    for path, group in chosen:
        texts += pq.ParquetFile(path).read_row_group(group, columns=["text"]).column(0).to_pylist()
    texts = [t for t in texts if len(t.split()) >= PASSAGE_WORDS[0]]
    picked = rng.sample(texts, min(count, len(texts)))
    return [passage(rng, t) for t in picked]


def ensure_reference(root: Path, corpus: Path, items: int, seed: int) -> Path:
    """The reference file (``id``, ``text``), made once per corpus, item count and seed."""
    path = root / "reference" / "bench.parquet"
    marker = root / REFERENCE_MARKER
    wanted = {"corpus": str(corpus), "items": items, "seed": seed, "leaked": LEAKED_SHARE, "v": 2}
    with contextlib.suppress(OSError, ValueError):
        if json.loads(marker.read_text()) == wanted and path.exists():
            return path
    rng = random.Random(seed)
    leaked = leaked_texts(corpus, int(items * LEAKED_SHARE), rng)
    wanted_others = items - len(leaked)
    others, _ = generate_corpus(wanted_others * 11 // 10, seed=seed + 1_000_003, mean_words=80)
    # (the generator makes some empty or tiny documents: an item needs words)
    drawn = [passage(rng, t) for t in others.column("text").to_pylist()]
    texts = leaked + [t for t in drawn if len(t.split()) >= PASSAGE_WORDS[0]][:wanted_others]
    ids = [f"leak/{i}" for i in range(len(leaked))]
    ids += [f"other/{i}" for i in range(len(texts) - len(leaked))]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ids, "text": texts}), path)
    marker.write_text(json.dumps(wanted) + "\n")
    return path


def run_neardup(args: list[str], out: Path, log: Path, timeout: float) -> dict[str, Any]:
    """One ``neardup`` run, measured; its report.json with the wall seconds and peak memory."""
    measured = run_measured([*neardup_command(), *args], log, timeout=timeout, env=child_env())
    if measured.returncode != 0 or measured.timed_out:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"neardup {args[0]} failed (see {log}):\n{tail}")
    report = json.loads((out / "report.json").read_text())
    report["process_wall_seconds"] = round(measured.wall_seconds, 2)
    report["peak_rss_gb"] = round(measured.peak_rss_bytes / 2**30, 2)
    return report


def measure(docs: int, items: int, seed: int, workdir: Path, timeout: float) -> dict[str, Any]:
    """Generate (once) and run both; the figures."""
    made = ensure_corpus(workdir, docs, seed, timeout)
    root = Path(made["path"])
    corpus = root / "corpus"
    reference = ensure_reference(root, corpus, items, seed)
    runs = workdir / "decontaminate-runs" / str(docs)
    dedupe_out, decon_out = runs / "dedupe", runs / "decontaminate"
    dedupe = run_neardup(
        ["dedupe", str(corpus), str(dedupe_out), "--overwrite", "--no-report"],
        dedupe_out,
        runs / "dedupe.log",
        timeout,
    )
    decon = run_neardup(
        [
            "decontaminate",
            str(corpus),
            "--reference",
            str(reference),
            str(decon_out),
            "--overwrite",
        ],
        decon_out,
        runs / "decontaminate.log",
        timeout,
    )
    sketch = dedupe["stage_seconds"]["sketch"]
    stages = decon["stage_seconds"]
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "docs": docs,
        "items": items,
        "corpus_generated_seconds": made["seconds"],
        "dedupe_sketch_seconds": sketch,
        "dedupe_plan_sketch": dedupe.get("plan", {}).get("sketch"),
        "dedupe_wall_seconds": dedupe["wall_seconds"],
        "decontaminate_corpus_seconds": stages["corpus"],
        "decontaminate_stage_seconds": stages,
        "decontaminate_plan": decon.get("plan"),
        "decontaminate_wall_seconds": decon["wall_seconds"],
        "decontaminate_peak_rss_gb": decon["peak_rss_gb"],
        "counts": decon["counts"],
        "ratio": round(stages["corpus"] / sketch, 2),
        "ratio_hits_only": round(stages.get("hits", 0.0) / sketch, 2),
    }


def summary(result: dict[str, Any]) -> list[str]:
    """The figures, one per line."""
    steps = ", ".join(
        f"{k} {v:.1f}"
        for k, v in result["decontaminate_stage_seconds"].items()
        if k not in ("corpus", "reference")
    )
    verdict = "within" if result["ratio"] <= TARGET_RATIO else "OVER"
    return [
        f"documents                 {result['docs']:,} (reference {result['items']:,} items)",
        f"dedupe sketch             {result['dedupe_sketch_seconds']:.1f} s",
        f"decontaminate corpus pass {result['decontaminate_corpus_seconds']:.1f} s ({steps})",
        f"ratio                     {result['ratio']:.2f}x ({verdict} the {TARGET_RATIO}x target;"
        f" the tokenising pass alone {result['ratio_hits_only']:.2f}x)",
        f"found                     {result['counts']['items_found']:,} items in "
        f"{result['counts']['contaminated']:,} documents",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neardup_spark.bench.decontaminate")
    parser.add_argument("--docs", type=int, default=DEFAULT_DOCS)
    parser.add_argument("--items", type=int, default=DEFAULT_ITEMS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default="out/bench")
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    result = measure(args.docs, args.items, args.seed, workdir, args.timeout)
    (workdir / f"decontaminate-{args.docs}.json").write_text(json.dumps(result, indent=2) + "\n")
    sys.stdout.write("\n".join(summary(result)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
