"""Human-labelled pairs: how our verification decision agrees with people's judgements.

Pure Python, NumPy and PyArrow (no Spark). For each labelled pair, the decision the job makes
on a verified candidate: exact Jaccard of the two texts' word ``ngram``-shingle sets (default
normalisation) ``>= t``. Per label: pairs, mean Jaccard, how many (and what fraction) reach
``t``. Precision = positive-labelled pairs reaching ``t`` / all positive- or negative-labelled
pairs reaching ``t``; recall = positive-labelled pairs reaching ``t`` / positive-labelled
pairs. Intermediate labels are reported but count for neither.

``copycat_judgments/pairs.jsonl``: ``label_raw`` ``"3"`` positive, ``"0.5"`` negative, ``"2"``
and ``"1"`` intermediate, anything else ignored (counted).
``clough_stevenson/{docs.csv,pairs.csv}``: each answer against its source; ``cut`` and
``light`` positive, ``heavy`` and ``non`` negative.

The sets live under :func:`default_labelled_dir`; an absent one is skipped with a note.
"""

from __future__ import annotations

import csv
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from neardup_spark.errors import UserError
from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.normalize import DEFAULT_OPTIONS, NormalizeOptions, normalize_texts
from neardup_spark.kernels.shingles import shingle_sets
from neardup_spark.quality.metrics import f1, ratio

LABELLED_ENV = "NEARDUP_LABELLED_DIR"
LABELLED_SEED = 42  # word-hash seed of the labelled evaluation; it does not change a Jaccard


def default_labelled_dir() -> Path:
    """``$NEARDUP_LABELLED_DIR``, else ``../shared/data/labelled`` next to the repository."""
    env = os.environ.get(LABELLED_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "labelled"


def text_pair_jaccard(
    first: Sequence[str | None],
    second: Sequence[str | None],
    ngram: int = 5,
    options: NormalizeOptions = DEFAULT_OPTIONS,
) -> np.ndarray:
    """Exact Jaccard of the word ``ngram``-shingle sets of each pair of texts (job kernels)."""
    if len(first) != len(second):
        raise ValueError("first and second must have the same length")
    n = len(first)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    texts = pa.array(list(first) + list(second), type=pa.large_string())
    sets = shingle_sets(normalize_texts(texts, options), ngram, LABELLED_SEED)
    return np.fromiter(
        (jaccard(sets.doc(i), sets.doc(n + i)) for i in range(n)), dtype=np.float64, count=n
    )


@dataclass(frozen=True)
class LabelledPairs:
    """A labelled set read into memory: one text pair and one label per row."""

    first: list[str | None]
    second: list[str | None]
    labels: list[str]
    ignored: dict[str, int]
    notes: list[str]


@dataclass(frozen=True)
class LabelledSet:
    """Where a labelled set lives, how to read it, and which labels mean what."""

    name: str
    files: tuple[str, ...]
    positive: tuple[str, ...]
    negative: tuple[str, ...]
    intermediate: tuple[str, ...]
    reader: Callable[[Path], LabelledPairs]

    def role(self, label: str) -> str:
        if label in self.positive:
            return "positive"
        if label in self.negative:
            return "negative"
        return "intermediate"


def read_copycat(directory: Path) -> LabelledPairs:
    """``pairs.jsonl``: ``first_text``, ``second_text``, ``label_raw``."""
    kept = {"3", "2", "1", "0.5"}
    first: list[str | None] = []
    second: list[str | None] = []
    labels: list[str] = []
    ignored: Counter[str] = Counter()
    with open(directory / "pairs.jsonl", encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{directory}/pairs.jsonl line {number}: {exc}") from None
            label = str(row.get("label_raw"))
            if label not in kept:
                ignored[label] += 1
                continue
            first.append(row.get("first_text"))
            second.append(row.get("second_text"))
            labels.append(label)
    return LabelledPairs(first, second, labels, dict(ignored), [])


def read_clough_stevenson(directory: Path) -> LabelledPairs:
    """``docs.csv`` (``File``, ``Task``, ``Category``, ``text``) and ``pairs.csv``
    (``answer_file``, ``source_file``, ``task``, ``category``)."""
    with open(directory / "docs.csv", encoding="utf-8-sig", newline="") as handle:
        texts = {row["File"]: row["text"] for row in csv.DictReader(handle)}
    first: list[str | None] = []
    second: list[str | None] = []
    labels: list[str] = []
    missing = 0
    with open(directory / "pairs.csv", encoding="utf-8-sig", newline="") as handle:
        for row in csv.DictReader(handle):
            answer, source = row["answer_file"], row["source_file"]
            if answer not in texts or source not in texts:
                missing += 1
                continue
            first.append(texts[answer])
            second.append(texts[source])
            labels.append(row["category"].strip())
    notes = [f"{missing} pairs name a file absent from docs.csv"] if missing else []
    return LabelledPairs(first, second, labels, {}, notes)


LABELLED_SETS = (
    LabelledSet(
        name="copycat_judgments",
        files=("pairs.jsonl",),
        positive=("3",),
        negative=("0.5",),
        intermediate=("2", "1"),
        reader=read_copycat,
    ),
    LabelledSet(
        name="clough_stevenson",
        files=("docs.csv", "pairs.csv"),
        positive=("cut", "light"),
        negative=("heavy", "non"),
        intermediate=(),
        reader=read_clough_stevenson,
    ),
)


def _label_rows(
    spec: LabelledSet, labels: np.ndarray, sims: np.ndarray, hit: np.ndarray
) -> list[dict[str, Any]]:
    """One row per label: the set's own labels in role order (even when absent), then any
    other label found in the data."""
    order = [*spec.positive, *spec.intermediate, *spec.negative]
    order += sorted(set(labels.tolist()) - set(order))
    rows = []
    for label in order:
        mask = labels == label
        count = int(mask.sum())
        if not count and label not in (*spec.positive, *spec.negative, *spec.intermediate):
            continue
        rows.append(
            {
                "label": label,
                "role": spec.role(label),
                "pairs": count,
                "mean_jaccard": float(sims[mask].mean()) if count else None,
                "median_jaccard": float(np.median(sims[mask])) if count else None,
                "at_threshold": int((mask & hit).sum()),
                "fraction_at_threshold": ratio(int((mask & hit).sum()), count),
            }
        )
    return rows


def _evaluate_set(
    spec: LabelledSet, directory: Path, threshold: float, ngram: int
) -> dict[str, Any]:
    """One labelled set read from ``directory`` and scored at ``threshold``."""
    started = time.perf_counter()
    data = spec.reader(directory)
    sims = text_pair_jaccard(data.first, data.second, ngram)
    labels = np.asarray(data.labels, dtype=object)
    hit = sims >= threshold
    rows = _label_rows(spec, labels, sims, hit)
    is_pos = np.isin(labels, spec.positive)
    is_neg = np.isin(labels, spec.negative)
    tp, fn = int((is_pos & hit).sum()), int((is_pos & ~hit).sum())
    fp, tn = int((is_neg & hit).sum()), int((is_neg & ~hit).sum())
    precision, recall = ratio(tp, tp + fp), ratio(tp, tp + fn)
    return {
        "available": True,
        "dir": str(directory),
        "pairs": int(labels.size),
        "positive_labels": list(spec.positive),
        "negative_labels": list(spec.negative),
        "intermediate_labels": list(spec.intermediate),
        "ignored": data.ignored,
        "notes": data.notes,
        "labels": rows,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": precision,
        "recall": recall,
        "f1": f1(precision, recall),
        "seconds": round(time.perf_counter() - started, 3),
    }


def evaluate_labelled(
    labelled_dir: str | os.PathLike[str] | None = None, threshold: float = 0.8, ngram: int = 5
) -> dict[str, Any]:
    """Our verification decision (exact Jaccard ``>= threshold``) on each human-labelled set.

    ``labelled_dir`` defaults to :func:`default_labelled_dir`. An absent directory (or set) is
    skipped with a note (``available: False``), never an error.
    """
    if not 0.0 < threshold <= 1.0:
        raise UserError(f"threshold must be in (0, 1], got {threshold}")
    if ngram < 1:
        raise UserError(f"ngram must be a positive integer, got {ngram}")
    directory = Path(labelled_dir) if labelled_dir is not None else default_labelled_dir()
    result: dict[str, Any] = {
        "dir": str(directory),
        "threshold": threshold,
        "ngram": ngram,
        "available": directory.is_dir(),
        "sets": {},
    }
    if not directory.is_dir():
        result["note"] = (
            f"labelled data not found at {directory} (set {LABELLED_ENV} or pass the directory); "
            "skipped"
        )
        return result
    for spec in LABELLED_SETS:
        set_dir = directory / spec.name
        absent = [f for f in spec.files if not (set_dir / f).is_file()]
        if absent:
            result["sets"][spec.name] = {
                "available": False,
                "dir": str(set_dir),
                "note": f"missing {', '.join(absent)}; skipped",
            }
            continue
        result["sets"][spec.name] = _evaluate_set(spec, set_dir, threshold, ngram)
    result["available"] = any(s["available"] for s in result["sets"].values())
    if not result["available"]:
        result["note"] = f"no labelled set found under {directory}; skipped"
    return result
