"""The typed configuration, resolved once where it is built.

Two objects come out of the same layered settings (defaults, mirrored in ``conf/default.yaml``
-> each ``--config`` YAML file -> ``--set key=value`` overrides -> explicit command-line
options; later wins):

* :class:`DedupeConfig`: what a run computes. Every instance is validated and has its LSH
  banding resolved (:attr:`DedupeConfig.banding`, derived from the threshold unless ``bands``
  and ``rows`` are given), so later layers never resolve or check it again.
* :class:`SessionSettings`: where and how Spark runs (master, Spark settings, Arrow batch
  size); :func:`neardup_spark.runtime.session.build_session` takes it.

:func:`load_settings` returns both (the command line); :func:`build_config` only the first
(the Python API).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from neardup_spark.errors import UserError
from neardup_spark.kernels.boilerplate import UNITS as BOILERPLATE_UNITS
from neardup_spark.kernels.lsh import choose_bands
from neardup_spark.kernels.normalize import NormalizeOptions
from neardup_spark.kernels.shingles import SHINGLE_UNITS
from neardup_spark.redaction import redact_override, redact_remote, redact_settings

METHODS = ("minhash", "simhash", "exact")
SIMHASH_FEATURES = ("words", "shingles")
SIMHASH_HASHES = ("mmh3", "md5")
SIMHASH_WEIGHTINGS = ("count", "binary")
INDEX_CHECKS = ("full", "quick")
REPRESENTATIVE_RULES = ("smallest_id", "longest_text")
SORT_WAYS = ("asc", "desc")
BOILERPLATE_MODES = ("template", "repeats")
PREFER_SYNTAX = (
    'prefer takes "COLUMN [asc|desc][, COLUMN [asc|desc] ...]", a name holding spaces or commas '
    "in backticks (`fetch date` desc; a backtick in it doubled)"
)
# A name in backticks, a backtick in it doubled.
_QUOTED_NAME = re.compile(r"`((?:[^`]|``)*)`")


def parse_prefer(text: str) -> tuple[tuple[str, bool], ...]:
    """``--prefer "COL [asc|desc][, COL ...]"`` -> ``((column, descending), ...)``.

    A name is taken as it is (dots, brackets, any letters: the column of that exact name); one
    holding spaces or commas, or starting with a backtick, is written in backticks, a backtick
    in it doubled.

    >>> parse_prefer("quality desc, fetch_date")
    (('quality', True), ('fetch_date', False))
    >>> parse_prefer("`fetch date` DESC, meta.score, `we``ird`, desc desc")
    (('fetch date', True), ('meta.score', False), ('we`ird', False), ('desc', True))
    """
    keys = []
    rest = text.strip()
    while True:
        name, rest = _prefer_name(rest, text)
        way, comma, rest = rest.partition(",")
        words = way.split()
        if not name or len(words) > 1 or (words and words[0].lower() not in SORT_WAYS):
            raise UserError(f"{PREFER_SYNTAX}, got {text!r}")
        keys.append((name, bool(words) and words[0].lower() == "desc"))
        if not comma:
            return tuple(keys)
        rest = rest.strip()


def _prefer_name(rest: str, text: str) -> tuple[str, str]:
    """The column name ``rest`` (of ``--prefer text``) starts with, and what follows it."""
    if not rest.startswith("`"):
        name = re.split(r"[\s,]", rest, maxsplit=1)[0]
        return name, rest[len(name) :]
    quoted = _QUOTED_NAME.match(rest)
    after = rest[quoted.end() :] if quoted else ""
    if quoted is None or not (after[:1] in ("", ",") or after[:1].isspace()):
        raise UserError(f"{PREFER_SYNTAX}; no closing backtick after a name in {text!r}")
    return quoted.group(1).replace("``", "`"), after


def prefer_spelling(name: str) -> str:
    """``name`` as ``--prefer`` takes it: in backticks (a backtick in it doubled) when it holds
    a space or a comma or starts with a backtick, else as it is.

    >>> prefer_spelling("note, desc"), prefer_spelling("we`ird"), prefer_spelling("`x`")
    ('`note, desc`', 'we`ird', '```x```')
    """
    if name.startswith("`") or re.search(r"[\s,]", name):
        return "`" + name.replace("`", "``") + "`"
    return name


def prefer_hint(name: str, present: list[str]) -> str:
    """For a ``--prefer`` column ``name`` missing from ``present``: how to write the present
    columns whose names hold it and need backticks (``note`` of ``note, desc``); else ``""``."""
    spelled = [prefer_spelling(c) for c in present if name in c and prefer_spelling(c) != c]
    return f" (in --prefer, write {' or '.join(spelled[:3])})" if spelled else ""


@dataclass(frozen=True)
class BoilerplateOptions:
    """What ``neardup boilerplate`` and ``dedupe --strip-boilerplate`` remove (README,
    Boilerplate). Validated on construction."""

    # line | paragraph (blank-line separated)
    unit: str = "line"
    # template: every occurrence of a unit found in >= min_docs documents; repeats: every
    # occurrence after the first (smallest id, or the prefer order).
    mode: str = "template"
    min_docs: int = 5
    # Units with fewer words (characters for Chinese, Japanese, Thai...) are never removed.
    min_words: int = 2
    # Count documents within each value of this column (a host or site), not across the corpus.
    group_col: str | None = None
    # repeats: which occurrence is first, "COL [asc|desc][, COL ...]" (nulls last, then id).
    prefer: str | None = None
    # Boilerplate sets up to this many units are broadcast to the cleaning pass; larger ones
    # are joined to the documents.
    broadcast_max_units: int = 2_000_000

    def __post_init__(self) -> None:
        for name, allowed in (("unit", BOILERPLATE_UNITS), ("mode", BOILERPLATE_MODES)):
            if getattr(self, name) not in allowed:
                raise UserError(
                    f"boilerplate.{name} must be one of {', '.join(allowed)}, "
                    f"got {getattr(self, name)!r}"
                )
        for name, least in (("min_docs", 2), ("min_words", 1), ("broadcast_max_units", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise UserError(f"boilerplate.{name} must be an integer >= {least}, got {value!r}")
        if self.group_col is not None and (
            not isinstance(self.group_col, str) or not self.group_col
        ):
            raise UserError("boilerplate.group_col must be a column name")
        if self.prefer is not None:
            if self.mode != "repeats":
                raise UserError("boilerplate.prefer orders occurrences in --mode repeats only")
            parse_prefer(str(self.prefer))

    @property
    def prefer_order(self) -> tuple[tuple[str, bool], ...]:
        """``prefer`` parsed: ``((column, descending), ...)``; empty without it."""
        return parse_prefer(self.prefer) if self.prefer else ()


@dataclass(frozen=True)
class Banding:
    """LSH banding: ``bands`` bands of ``rows`` MinHash values each."""

    bands: int
    rows: int


@dataclass(frozen=True)
class DedupeConfig:
    """Everything that decides what a run computes. Validated and resolved on construction:
    a bad value raises :class:`UserError`."""

    method: str = "minhash"
    id_col: str = "id"
    text_col: str = "text"
    ngram: int = 5
    # word | char | auto: auto shingles a document by characters when at least half of its
    # non-space characters come from scripts written without spaces (Chinese, Japanese, Thai...).
    shingle_unit: str = "auto"
    char_ngram: int = 5
    num_perm: int = 200
    threshold: float = 0.8
    # Requested banding; both None: derived from the threshold (see ``banding``).
    bands: int | None = None
    rows: int | None = None
    min_recall: float = 0.99
    seed: int = 42
    normalize: NormalizeOptions = field(default_factory=NormalizeOptions)
    # Collapse exact copies (same normalised text) before sketching; map them back afterwards.
    exact_first: bool = True
    # Group exact copies by their normalised text, not only its 64-bit fingerprint.
    exact_compare_text: bool = False
    # SimHash: pairs within hamming_k bits, found with C(blocks, hamming_k) block tables.
    hamming_k: int = 3
    blocks: int = 6
    simhash_features: str = "words"
    simhash_hash: str = "mmh3"
    simhash_weighting: str = "binary"
    representative: str = "smallest_id"
    # Keep policy: each cluster's representative is its first document ordered by these input
    # columns ("quality desc, fetch_date"), nulls last, ties to the smallest id.
    prefer: str | None = None
    # LSH buckets up to this size emit all their pairs; larger ones a star from their smallest
    # id, so candidate edges stay linear in the bucket size.
    bucket_all_pairs_max: int = 10
    # Verified graphs up to this many edges get their components in one executor task (SciPy);
    # larger ones in distributed large-star/small-star rounds. None: as many as one Python
    # task's memory holds (pipeline/execution.py, single_task_edge_limit).
    components_single_task_max_edges: int | None = None
    # Nightly runs (--index) of up to this many new documents do their own work (contents,
    # candidates, verification, stable ids, the new segment) on the driver, after the full run's
    # per-document pass; larger batches run every step as Spark jobs. The answer is the same.
    nightly_driver_max_docs: int = 100_000
    # Such a night reads the rows it needs of the index's narrow docs and pairs tables in the
    # driver (filtered PyArrow scans) when a table has up to this many rows and the driver can
    # read the index's files; else in Spark jobs. The answer is the same. 0: always Spark.
    nightly_driver_scan_max_rows: int = 20_000_000
    # In local mode, a run (and a night on the driver) whose input is local Parquet files with
    # id and text columns of at most this many bytes uncompressed reads them with PyArrow and
    # does its per-document pass in the driver's threads, not as Spark tasks (a night keeps
    # the texts in the driver's memory until it ends, for its verification); a night also
    # scans the index's keys in the driver's threads. The answer is the same. 0: always Spark
    # tasks (pipeline/in_process.py).
    driver_read_max_bytes: int = 512 * 2**20
    # Runs of up to this many documents find their exact copies, candidates, verified pairs
    # and (with the default representatives) clusters on the driver after the per-document
    # pass, not as Spark stages (pipeline/driver_pairs.py): the same pairs, without each
    # stage's fixed cost. 0: always as Spark stages.
    driver_max_docs: int = 200_000
    # What a night checks of the index's files before it reads them (nightly/integrity.py):
    # "full" every byte against its recorded SHA-256; "quick" sizes, keys, docs and pairs, and
    # each text it reads (for large indexes on object stores, where full reads cost).
    index_check: str = "full"
    # Skip whole the input files that cannot be read to their end (cut short, damaged,
    # unreadable footer) and leave out malformed records, each listed in the report, instead of
    # failing with exit 2.
    skip_corrupt: bool = False
    # Remove boilerplate units (``boilerplate``) before fingerprinting (dedupe
    # --strip-boilerplate); deduplicated/ keeps the input rows as they were.
    strip_boilerplate: bool = False
    boilerplate: BoilerplateOptions = field(default_factory=BoilerplateOptions)
    # The banding in use: the requested one, or derived from threshold, num_perm, min_recall.
    banding: Banding = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._validate()
        object.__setattr__(self, "banding", self._resolve_banding())

    def _resolve_banding(self) -> Banding:
        if (self.bands is None) != (self.rows is None):
            raise UserError("give both --bands and --rows, or neither (then they are derived)")
        if self.bands is None or self.rows is None:
            return Banding(*choose_bands(self.threshold, self.num_perm, self.min_recall))
        if self.bands < 1 or self.rows < 1 or self.bands * self.rows > self.num_perm:
            raise UserError(
                f"bands x rows = {self.bands} x {self.rows} must be >= 1 each and fit in "
                f"num_perm = {self.num_perm}"
            )
        return Banding(self.bands, self.rows)

    def _validate(self) -> None:
        if self.method not in METHODS:
            raise UserError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.representative not in REPRESENTATIVE_RULES:
            raise UserError(
                f"representative must be one of {', '.join(REPRESENTATIVE_RULES)}, "
                f"got {self.representative!r}"
            )
        if self.prefer is not None and self.representative != "smallest_id":
            raise UserError("give --prefer or --representative longest_text, not both")
        for name, allowed in (
            ("shingle_unit", SHINGLE_UNITS),
            ("simhash_features", SIMHASH_FEATURES),
            ("simhash_hash", SIMHASH_HASHES),
            ("simhash_weighting", SIMHASH_WEIGHTINGS),
            ("index_check", INDEX_CHECKS),
        ):
            if getattr(self, name) not in allowed:
                raise UserError(
                    f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        if not (isinstance(self.hamming_k, int) and isinstance(self.blocks, int)) or not (
            0 <= self.hamming_k < self.blocks <= 64
        ):
            raise UserError(
                f"need 0 <= hamming_k < blocks <= 64, got hamming_k={self.hamming_k}, "
                f"blocks={self.blocks}"
            )
        if math.comb(self.blocks, self.hamming_k) > 1000:
            raise UserError(
                f"blocks={self.blocks}, hamming_k={self.hamming_k} need "
                f"{math.comb(self.blocks, self.hamming_k)} tables; keep C(blocks, k) <= 1000"
            )
        if not 0.0 < self.threshold <= 1.0:
            raise UserError(f"threshold must be in (0, 1], got {self.threshold}")
        if not 0.0 < self.min_recall < 1.0:
            raise UserError(f"min_recall must be in (0, 1), got {self.min_recall}")
        for name in ("ngram", "char_ngram", "num_perm", "bucket_all_pairs_max"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise UserError(f"{name} must be a positive integer, got {value!r}")
        for name in (
            "components_single_task_max_edges",
            "nightly_driver_max_docs",
            "nightly_driver_scan_max_rows",
            "driver_read_max_bytes",
            "driver_max_docs",
        ):
            value = getattr(self, name)
            if value is None and name == "components_single_task_max_edges":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UserError(f"{name} must be an integer >= 0, got {value!r}")
        if self.bucket_all_pairs_max < 2:
            raise UserError("bucket_all_pairs_max must be >= 2")
        for name in ("id_col", "text_col"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise UserError(
                    f"{name} must be a column name, got {value!r}; in YAML or --set, quote a "
                    f'name that reads as a number or a boolean ({name}: "2026")'
                )
        if self.prefer is not None and not (isinstance(self.prefer, str) and self.preference):
            raise UserError(f'prefer must be text like "quality desc", got {self.prefer!r}')

    @property
    def preference(self) -> tuple[tuple[str, bool], ...]:
        """``prefer`` parsed: ``((column, descending), ...)``; empty without a keep policy."""
        return parse_prefer(self.prefer) if self.prefer is not None else ()

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data, with the banding in use as ``bands`` and ``rows``."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        data["normalize"] = dataclasses.asdict(self.normalize)
        data["boilerplate"] = dataclasses.asdict(self.boilerplate)
        data["bands"], data["rows"] = self.banding.bands, self.banding.rows
        return data

    def settings_json(self) -> str:
        """A stable JSON form of the settings that decide the result (hashed into manifests,
        compared by the nightly index)."""
        data = self.to_dict()
        data.pop("skip_corrupt")
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DedupeConfig:
        """A config from :meth:`to_dict`'s form, as recorded in a report or manifest; keys that
        are not settings of this class (session settings, newer or older keys) are ignored."""
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        values = {k: v for k, v in data.items() if k in known}
        for key, nested in _NESTED.items():
            if isinstance(values.get(key), dict):
                values[key] = nested(**values[key])
        return cls(**values)


# Seconds a run waits for another that holds its index or OUTPUT (an overlapping nightly run
# waits for the one before it, then commits on top of it).
DEFAULT_LOCK_TIMEOUT = 3600.0


@dataclass(frozen=True)
class SessionSettings:
    """Where and how the job runs; none of it changes what a run computes."""

    # Spark master; None: spark-submit's, or local[*].
    master: str | None = None
    # Spark Connect server (sc://HOST:PORT); None: spark.remote of `spark:`, else SPARK_REMOTE.
    remote: str | None = None
    # Extra Spark settings, e.g. {"spark.driver.memory": "4g"}.
    spark: dict[str, str] = field(default_factory=dict)
    # Documents per Arrow batch in the Python stages (spark.sql.execution.arrow.maxRecordsPerBatch).
    arrow_batch_size: int = 2000
    # Seconds to wait for another run holding the index or OUTPUT (its lock); 0: do not wait.
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.arrow_batch_size, int) or self.arrow_batch_size < 1:
            raise UserError(
                f"arrow_batch_size must be a positive integer, got {self.arrow_batch_size!r}"
            )
        timeout = self.lock_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise UserError(f"lock_timeout must be a number of seconds >= 0, got {timeout!r}")

    def to_dict(self) -> dict[str, Any]:
        """The settings as a report, manifest or log records them: secret Spark settings'
        values redacted (:func:`~neardup_spark.redaction.redact_settings`)."""
        data = dataclasses.asdict(self)
        data["spark"] = redact_settings(data["spark"])
        data["remote"] = redact_remote(data["remote"])
        return data


@dataclass(frozen=True)
class JobSettings:
    """Both halves of one command's settings."""

    dedupe: DedupeConfig
    session: SessionSettings

    def to_dict(self) -> dict[str, Any]:
        """The ``config`` section of a run report: every setting, dedupe and session."""
        return {**self.dedupe.to_dict(), **self.session.to_dict()}


_SESSION_KEYS = frozenset(f.name for f in dataclasses.fields(SessionSettings))
_DEDUPE_KEYS = frozenset(f.name for f in dataclasses.fields(DedupeConfig) if f.init)
_NESTED: dict[str, type] = {"normalize": NormalizeOptions, "boilerplate": BoilerplateOptions}


def _merge(base: dict[str, Any], layer: dict[str, Any], source: str) -> dict[str, Any]:
    known = _DEDUPE_KEYS | _SESSION_KEYS
    out = dict(base)
    for key, value in layer.items():
        if key not in known:
            raise UserError(f"{source}: unknown setting {key!r}; known: {', '.join(sorted(known))}")
        if key in _NESTED:
            if not isinstance(value, dict):
                raise UserError(f"{source}: {key} must be a mapping")
            sub_known = {f.name for f in dataclasses.fields(_NESTED[key])}
            for sub in value:
                if sub not in sub_known:
                    known_list = ", ".join(sorted(sub_known))
                    raise UserError(f"{source}: unknown setting {key}.{sub}; known: {known_list}")
            out[key] = {**out.get(key, {}), **value}
        elif key == "spark":
            if not isinstance(value, dict):
                raise UserError(f"{source}: spark must be a mapping of Spark settings")
            out[key] = {**out.get(key, {}), **{str(k): str(v) for k, v in value.items()}}
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict[str, Any]:
    """``"a.b=1"`` -> ``{"a": {"b": 1}}``; the value is read as YAML (numbers, booleans, null)."""
    if "=" not in text:
        raise UserError(f"--set expects key=value, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    parts = key.strip().split(".")
    if parts[0] == "spark" and len(parts) > 1:
        # A Spark setting, kept whole: --set spark.sql.shuffle.partitions=8
        return {"spark": {key.strip(): raw}}
    node: dict[str, Any] = {}
    cursor = node
    for part in parts[:-1]:
        cursor[part] = {}
        cursor = cursor[part]
    cursor[parts[-1]] = value
    return node


def read_yaml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except FileNotFoundError:
        raise UserError(f"config file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a mapping of settings")
    return data


def _layered(
    config_files: list[str] | None,
    overrides: list[str] | None,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for path in config_files or []:
        merged = _merge(merged, read_yaml(path), str(path))
    for text in overrides or []:
        merged = _merge(merged, parse_override(text), f"--set {redact_override(text)}")
    return _merge(merged, {k: v for k, v in (options or {}).items() if v is not None}, "options")


def _build(cls: type, values: dict[str, Any]) -> Any:
    try:
        return cls(**values)
    except TypeError as exc:
        raise UserError(f"bad configuration: {exc}") from None


def load_settings(
    config_files: list[str] | None = None,
    overrides: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> JobSettings:
    """Layer defaults, YAML files, ``key=value`` overrides and explicit options into the dedupe
    config and the session settings, both validated."""
    merged = _layered(config_files, overrides, options)
    for key, nested in _NESTED.items():
        if key in merged:
            merged[key] = nested(**merged[key])
    dedupe = _build(DedupeConfig, {k: v for k, v in merged.items() if k in _DEDUPE_KEYS})
    session = _build(SessionSettings, {k: v for k, v in merged.items() if k in _SESSION_KEYS})
    return JobSettings(dedupe, session)


def load_session_settings(
    config_files: list[str] | None = None,
    overrides: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> SessionSettings:
    """Only the session settings of the same layers (commands that run no dedupe: ingest,
    index); dedupe keys in a shared config file are accepted and not validated here."""
    merged = _layered(config_files, overrides, options)
    return _build(SessionSettings, {k: v for k, v in merged.items() if k in _SESSION_KEYS})


def build_config(
    config_files: list[str] | None = None,
    overrides: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> DedupeConfig:
    """The dedupe config of the same layers (the Python API); session keys are accepted (a
    config file may hold both) and left to :func:`load_settings`."""
    return load_settings(config_files, overrides, options).dedupe


def default_settings_dict() -> dict[str, Any]:
    """Every setting's default as written in ``conf/default.yaml`` (requested banding: null)."""
    data = {
        f.name: f.default
        for f in dataclasses.fields(DedupeConfig)
        if f.init and f.name not in _NESTED
    }
    data["normalize"] = dataclasses.asdict(NormalizeOptions())
    data["boilerplate"] = dataclasses.asdict(BoilerplateOptions())
    data.update(SessionSettings().to_dict())
    return data
