"""Measure the ingest's choices: main-content extractors and WARC readers.

``neardup eval-extract [--html FILE] [--warc DIR]`` prints two Markdown tables:

Extraction
    On the article-extraction benchmark (real news pages with a gold article body; by default
    ``../shared/data/html/article-extraction-benchmark.parquet`` next to the repository): for
    each extractor, token-level precision, recall and F1 against the gold body (bags of
    lowercase ``\\w+`` tokens, multiset overlap; averaged over pages) and pages per second on one
    core (the best of ``--repeats`` passes over decoded HTML strings). Extractors: the ingest's
    own ``--extract main`` and ``--extract text`` (Resiliparse), and trafilatura when it is
    installed (it is not a dependency: ``pip install trafilatura`` to compare).

WARC reading
    FastWARC (the ingest's reader) against warcio when installed: every record of every file
    under ``--warc`` (default ``../shared/data/warc``), HTTP headers parsed, payload read, from
    bytes in memory, best of ``--repeats`` passes: records/s and MB/s of (compressed) input.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

SHARED_ENV = "NEARDUP_SHARED_DATA"
_TOKEN = re.compile(r"\w+")


def shared_data_dir() -> Path:
    """``$NEARDUP_SHARED_DATA``, else ``../shared/data`` next to the repository."""
    env = os.environ.get(SHARED_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def tokens(text: str | None) -> Counter[str]:
    """The bag of lowercase word tokens of ``text``."""
    return Counter(_TOKEN.findall((text or "").lower()))


def token_scores(predicted: str | None, gold: str | None) -> tuple[float, float, float]:
    """Token-level (precision, recall, F1) of ``predicted`` against ``gold`` (multisets).

    An empty prediction has precision 1 only if the gold body is empty too; an empty gold body
    has recall 1.
    """
    pred, ref = tokens(predicted), tokens(gold)
    overlap = sum((pred & ref).values())
    n_pred, n_ref = sum(pred.values()), sum(ref.values())
    precision = overlap / n_pred if n_pred else float(n_ref == 0)
    recall = overlap / n_ref if n_ref else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def extractors() -> dict[str, Callable[[str], str]]:
    """The candidates: the ingest's two modes, and trafilatura if it is installed."""
    from neardup_spark.ingest.extract import extract_text  # the ingest extra (extras.py)

    found: dict[str, Callable[[str], str]] = {
        "resiliparse main (--extract main)": lambda html: extract_text(html, "main"),
        "resiliparse text (--extract text)": lambda html: extract_text(html, "text"),
    }
    try:
        import trafilatura  # optional (the eval extra), so imported only when comparing
    except ImportError:
        return found
    trafilatura_version = getattr(trafilatura, "__version__", "?")

    def with_trafilatura(html: str) -> str:
        return trafilatura.extract(html, include_comments=False) or ""

    found[f"trafilatura {trafilatura_version} (include_comments=False)"] = with_trafilatura
    return found


def evaluate_extractor(
    extract: Callable[[str], str], pages: Sequence[tuple[str, str]], repeats: int = 3
) -> dict[str, Any]:
    """Mean precision/recall/F1 over ``pages`` (html, gold) and the best pages/s of
    ``repeats`` passes."""
    best = float("inf")
    outputs: list[str] = []
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        outputs = [extract(html) for html, _ in pages]
        best = min(best, time.perf_counter() - started)
    scores = [token_scores(out, gold) for out, (_, gold) in zip(outputs, pages, strict=True)]
    n = len(scores)
    return {
        "pages": n,
        "precision": round(sum(s[0] for s in scores) / n, 4),
        "recall": round(sum(s[1] for s in scores) / n, 4),
        "f1": round(sum(s[2] for s in scores) / n, 4),
        "pages_per_second": round(n / best, 1),
        "empty_outputs": sum(1 for out in outputs if not out.strip()),
    }


def read_benchmark(path: Path) -> list[tuple[str, str]]:
    """(html, article_body) pairs of the benchmark Parquet file."""
    table = pq.read_table(path, columns=["html", "article_body"])
    return list(
        zip(table.column("html").to_pylist(), table.column("article_body").to_pylist(), strict=True)
    )


def _fastwarc_pass(data: bytes) -> int:
    from fastwarc.warc import ArchiveIterator  # the ingest extra (neardup_spark/extras.py)

    n = 0
    for record in ArchiveIterator(io.BytesIO(data), parse_http=True):
        record.reader.read()
        n += 1
    return n


def _warcio_pass(data: bytes) -> int:
    # warcio is optional (a dev dependency): imported only when it is timed.
    from warcio.archiveiterator import ArchiveIterator as WarcioIterator

    n = 0
    for record in WarcioIterator(io.BytesIO(data)):
        record.raw_stream.read()
        n += 1
    return n


def warc_read_speed(files: Sequence[Path], repeats: int = 5) -> dict[str, dict[str, Any]]:
    """Records/s and MB/s of each installed WARC library over ``files`` (read into memory)."""
    blobs = [path.read_bytes() for path in files]
    total = sum(len(b) for b in blobs)
    readers: dict[str, Callable[[bytes], int]] = {"fastwarc": _fastwarc_pass}
    try:
        import warcio  # noqa: F401  (optional: time it only when installed)

        readers["warcio"] = _warcio_pass
    except ImportError:
        pass
    results: dict[str, dict[str, Any]] = {}
    for name, read in readers.items():
        best = float("inf")
        records = 0
        for _ in range(max(1, repeats)):
            started = time.perf_counter()
            records = sum(read(blob) for blob in blobs)
            best = min(best, time.perf_counter() - started)
        results[name] = {
            "records": records,
            "seconds": round(best, 4),
            "records_per_second": round(records / best),
            "mb_per_second": round(total / best / 1e6, 1),
        }
    return results


def versions() -> dict[str, str]:
    """Installed versions of the libraries compared."""
    out = {}
    for name in ("resiliparse", "fastwarc", "warcio", "trafilatura"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out
