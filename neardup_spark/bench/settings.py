"""What one ``neardup bench`` measures: the rows, the sizes, where it works, and their
defaults (the command line's options map one to one onto :class:`BenchSettings`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

ROWS = (
    "floor",
    "neardup-minhash",
    "neardup-components",
    "neardup-simhash",
    "neardup-strip",
    "neardup-boilerplate",
    "neardup-connect",
    "spark-mllib",
    "datasketch",
    "rensa",
)
# Rows run only when named in --rows (bench/variants.py): neardup-minhash run another way.
VARIANT_ROWS = (
    "neardup-distributed-cc",
    "neardup-64-partitions",
    "neardup-standalone",
    "neardup-resume",
)
# Rows that run in a child process of their own (``neardup bench-row``, bench/children.py).
CHILD_ROWS = ("floor", "spark-mllib", "datasketch", "rensa")
# Rows that write no pairs/ (nothing to score).
UNSCORED_ROWS = ("floor", "neardup-boilerplate")
DEFAULT_DOCS = "10000,30000,100000"
DEFAULT_WORKDIR = "out/bench"
DEFAULT_SEED = 1
DEFAULT_THRESHOLD = 0.8
DEFAULT_MASTER = "local[2]"
DEFAULT_TIMEOUT = 900.0
DEFAULT_MLLIB_MAX_DOCS = 100_000
DEFAULT_DATASKETCH_MAX_DOCS = 100_000
DEFAULT_VARIANT_MAX_DOCS = 1_000_000
# The nightly case: index sizes and new documents per nightly run.
DEFAULT_SIZES = "100000,300000"
DEFAULT_NEW = 10_000
# The series: nights one after the other on one index of this many documents.
DEFAULT_SERIES_NIGHTS = 30
DEFAULT_SERIES_INDEX = 300_000


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


@dataclass(frozen=True)
class BenchSettings:
    """One benchmark: the main table (``docs`` x ``rows``), then the nightly case
    (``nightly_sizes``, ``nightly_new``) unless ``no_nightly``; only the nightly case with
    ``nightly_only``. ``results`` / ``markdown``: where the table goes (default
    ``WORKDIR/results.json`` and ``.md``)."""

    docs: Sequence[int] = _sizes(DEFAULT_DOCS)
    rows: Sequence[str] = ROWS
    workdir: str = DEFAULT_WORKDIR
    seed: int = DEFAULT_SEED
    threshold: float = DEFAULT_THRESHOLD
    master: str = DEFAULT_MASTER
    results: str | None = None
    markdown: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    mllib_max_docs: int = DEFAULT_MLLIB_MAX_DOCS
    datasketch_max_docs: int = DEFAULT_DATASKETCH_MAX_DOCS
    variant_max_docs: int = DEFAULT_VARIANT_MAX_DOCS
    # Disk, shuffle and sizing figures of the neardup rows (bench/scale.py).
    scale_metrics: bool = False
    # Skip timing the kernels' compilation (a fresh numba cache, ~20 s of CPU) before the rows.
    no_compile_timing: bool = False
    nightly_sizes: Sequence[int] = _sizes(DEFAULT_SIZES)
    nightly_new: int = DEFAULT_NEW
    nightly_repeats: int = 1
    nightly_series: int = DEFAULT_SERIES_NIGHTS
    nightly_series_index: int = DEFAULT_SERIES_INDEX
    no_nightly: bool = False
    nightly_only: bool = False
    # Also write the tables as Markdown pages for the documentation site (bench-main.md,
    # bench-nightly.md), headed by the date, the machine and the command (docs/performance/).
    docs_out: str | None = None


def bench_command(settings: BenchSettings) -> str:
    """The ``neardup bench`` command line that gives ``settings``: its options that differ from
    the defaults, each option named as its field.

    >>> bench_command(BenchSettings(docs=(2000,), no_nightly=True))
    'neardup bench --docs 2000 --no-nightly'
    """
    words = ["neardup", "bench"]
    default = BenchSettings()
    for f in fields(BenchSettings):
        value = getattr(settings, f.name)
        if _same(value, getattr(default, f.name)):
            continue
        option = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            words.append(option)
        elif isinstance(value, str | int | float):
            words += [option, str(value)]
        else:
            words += [option, ",".join(str(v) for v in value)]
    return " ".join(words)


def _same(value: object, default: object) -> bool:
    if isinstance(value, list | tuple) and isinstance(default, list | tuple):
        return list(value) == list(default)
    return value == default
