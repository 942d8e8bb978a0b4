"""DecontaminateConfig: what a ``neardup decontaminate`` run computes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from neardup_spark.errors import UserError

# Words per n-gram, as GPT-3's and lm-eval-harness's decontamination.
DEFAULT_NGRAM = 13
# An n-gram held by more corpus documents than this is too common to mean a leak.
DEFAULT_MAX_NGRAM_DOCS = 50
# Characters cut each side of a span (--cut-spans), as NeMo Curator's task decontamination.
DEFAULT_CUT_MARGIN = 200
# A cut document left shorter than this (characters) is dropped (NeMo Curator's default too).
DEFAULT_MIN_CHARS = 200
# The matches report.json lists, the most n-grams first.
TOP_MATCHES = 20


@dataclass(frozen=True)
class DecontaminateConfig:
    """The corpus's and the reference's columns, and the matching and cutting thresholds."""

    id_col: str = "id"
    text_col: str = "text"
    reference_id_col: str = "id"
    reference_fields: tuple[str, ...] = ()
    ngram: int = DEFAULT_NGRAM
    max_ngram_docs: int = DEFAULT_MAX_NGRAM_DOCS
    cut_spans: bool = False
    cut_margin: int = DEFAULT_CUT_MARGIN
    min_chars: int = DEFAULT_MIN_CHARS
    # Local Parquet corpora up to this many bytes run in this process (0: always Spark).
    driver_max_bytes: int = 128 * 2**20
    # The Spark pass over local Parquet files on this machine: its tasks read their row groups
    # with PyArrow (False: Spark reads the corpus and hands its texts to Python).
    task_reads: bool = True

    def __post_init__(self) -> None:
        for name, least in (
            ("ngram", 1),
            ("max_ngram_docs", 1),
            ("cut_margin", 0),
            ("min_chars", 0),
            ("driver_max_bytes", 0),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                option = "--" + name.replace("_", "-")
                raise UserError(f"{option} must be an integer >= {least}, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["reference_fields"] = list(self.reference_fields)
        return out
