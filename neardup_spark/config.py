"""The one typed configuration of a dedupe run.

Defaults are the dataclass defaults, mirrored in ``conf/default.yaml`` (a test keeps them equal).
Layers, later wins: defaults -> each ``--config`` YAML file -> ``--set key=value`` overrides ->
explicit command-line options. :meth:`DedupeConfig.resolved` derives the LSH banding from the
threshold and validates everything once.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from neardup_spark.errors import UserError
from neardup_spark.kernels.lsh import choose_bands
from neardup_spark.kernels.normalize import NormalizeOptions
from neardup_spark.kernels.shingles import SHINGLE_UNITS

METHODS = ("minhash", "simhash", "exact")
SIMHASH_FEATURES = ("words", "shingles")
SIMHASH_HASHES = ("mmh3", "md5")
SIMHASH_WEIGHTINGS = ("count", "binary")
REPRESENTATIVE_RULES = ("smallest_id", "longest_text")


@dataclass(frozen=True)
class DedupeConfig:
    """Everything that decides what a run computes (plus where it runs)."""

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
    # LSH buckets up to this size emit all their pairs; larger ones a star from their smallest
    # id, so candidate edges stay linear in the bucket size.
    bucket_all_pairs_max: int = 10
    # Verified graphs up to this many edges get their components in one executor task (SciPy);
    # larger ones in distributed large-star/small-star rounds.
    components_single_task_max_edges: int = 2_000_000
    # Leave out input files whose Parquet footer cannot be read (listed in the report) instead
    # of failing with exit 2.
    skip_corrupt: bool = False
    arrow_batch_size: int = 2000
    master: str | None = None
    spark: dict[str, str] = field(default_factory=dict)

    def resolved(self) -> DedupeConfig:
        """Validate and fill in ``bands``/``rows``; raises :class:`UserError` on bad values."""
        self._validate()
        if (self.bands is None) != (self.rows is None):
            raise UserError("give both --bands and --rows, or neither (then they are derived)")
        if self.bands is None:
            bands, rows = choose_bands(self.threshold, self.num_perm, self.min_recall)
            return dataclasses.replace(self, bands=bands, rows=rows)
        assert self.rows is not None
        if self.bands < 1 or self.rows < 1 or self.bands * self.rows > self.num_perm:
            raise UserError(
                f"bands x rows = {self.bands} x {self.rows} must be >= 1 each and fit in "
                f"num_perm = {self.num_perm}"
            )
        return self

    def _validate(self) -> None:
        if self.method not in METHODS:
            raise UserError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.representative not in REPRESENTATIVE_RULES:
            raise UserError(
                f"representative must be one of {', '.join(REPRESENTATIVE_RULES)}, "
                f"got {self.representative!r}"
            )
        for name, allowed in (
            ("shingle_unit", SHINGLE_UNITS),
            ("simhash_features", SIMHASH_FEATURES),
            ("simhash_hash", SIMHASH_HASHES),
            ("simhash_weighting", SIMHASH_WEIGHTINGS),
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
        for name in ("ngram", "char_ngram", "num_perm", "bucket_all_pairs_max", "arrow_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise UserError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.components_single_task_max_edges, int) or (
            self.components_single_task_max_edges < 0
        ):
            raise UserError("components_single_task_max_edges must be an integer >= 0")
        if self.bucket_all_pairs_max < 2:
            raise UserError("bucket_all_pairs_max must be >= 2")
        if not self.id_col or not self.text_col:
            raise UserError("id_col and text_col must be non-empty column names")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        """A stable JSON form of the settings that decide the result (not where it runs)."""
        data = self.to_dict()
        for key in ("master", "spark", "arrow_batch_size", "skip_corrupt"):
            data.pop(key)
        return json.dumps(data, sort_keys=True)


_NESTED = {"normalize": NormalizeOptions}


def _merge(base: dict[str, Any], layer: dict[str, Any], source: str) -> dict[str, Any]:
    known = {f.name for f in dataclasses.fields(DedupeConfig)}
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


def build_config(
    config_files: list[str] | None = None,
    overrides: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> DedupeConfig:
    """Layer defaults, YAML files, ``key=value`` overrides and explicit options; resolve."""
    merged: dict[str, Any] = {}
    for path in config_files or []:
        merged = _merge(merged, read_yaml(path), str(path))
    for text in overrides or []:
        merged = _merge(merged, parse_override(text), f"--set {text}")
    merged = _merge(merged, {k: v for k, v in (options or {}).items() if v is not None}, "options")
    if "normalize" in merged:
        merged["normalize"] = NormalizeOptions(**merged["normalize"])
    try:
        config = DedupeConfig(**merged)
    except TypeError as exc:
        raise UserError(f"bad configuration: {exc}") from None
    return config.resolved()
