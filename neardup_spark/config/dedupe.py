"""What a run computes: :class:`DedupeConfig` (validated, its banding resolved on construction)
and its nested :class:`BoilerplateOptions`."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from neardup_spark.config.prefer import parse_prefer
from neardup_spark.errors import UserError
from neardup_spark.kernels.boilerplate import UNITS as BOILERPLATE_UNITS
from neardup_spark.kernels.lsh import choose_bands
from neardup_spark.kernels.normalize import NormalizeOptions
from neardup_spark.kernels.shingles import SHINGLE_UNITS

METHODS = ("minhash", "simhash", "exact")
SIMHASH_FEATURES = ("words", "shingles")
SIMHASH_HASHES = ("mmh3", "md5")
SIMHASH_WEIGHTINGS = ("count", "binary")
INDEX_CHECKS = ("full", "quick")
REPRESENTATIVE_RULES = ("smallest_id", "longest_text")
CLUSTER_RULES = ("anchored", "components")
# jaccard: |A n B| / |A u B|; containment: |A n B| / |A| for the smaller set A (docs/containment.md)
SIMILARITIES = ("jaccard", "containment")
BOILERPLATE_MODES = ("template", "repeats")


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
    # What the threshold measures (MinHash): jaccard, or containment of the smaller shingle
    # set in the larger, the contained document removed in favour of its container.
    similarity: str = "jaccard"
    # containment: the largest size ratio of two sets (larger / smaller) the candidates are
    # tuned for (at min_recall); pairs further apart may still be found and are verified alike.
    containment_max_ratio: float = 20.0
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
    # anchored: documents are kept greedily in the keep order (prefer, else representative,
    # ties to the smallest id); one is removed only in favour of a kept document it has a
    # verified pair with, and no two kept documents have one. components: clusters are the
    # connected components of the verified pairs, one document kept per cluster (removal is
    # transitive: A ~ B and B ~ C removes C for A however unlike they are).
    cluster_rule: str = "anchored"
    # Keep policy: each cluster's representative is its first document ordered by these input
    # columns ("quality desc, fetch_date"), nulls last, ties to the smallest id.
    prefer: str | None = None
    # LSH buckets up to this size emit all their pairs; larger ones a star from their smallest
    # id, so candidate edges stay linear in the bucket size.
    bucket_all_pairs_max: int = 10
    # Under the anchored rule, each member of a larger bucket is also compared (MinHash estimate)
    # with the bucket's kept members, in keep order, up to this many of them; comparisons beyond
    # are skipped and counted (report.json counts.bucket_comparisons_skipped).
    bucket_kept_max: int = 100
    # What a night checks of the index's files before it reads them (nightly/integrity.py):
    # "full" every byte against its recorded SHA-256; "quick" sizes, keys, docs and pairs, and
    # each text it reads (for large indexes on object stores, where full reads cost).
    index_check: str = "full"
    # Skip whole the input files that cannot be read to their end (cut short, damaged,
    # unreadable footer) and leave out malformed records, each listed in the report, instead of
    # failing with exit 2.
    skip_corrupt: bool = False
    # deduplicated/'s column holding how many removed documents each row stands for (its
    # cluster's documents less one); "" leaves it out. An input column of that name is refused.
    duplicates_column: str = "duplicates"
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
            return Banding(*choose_bands(self.jaccard_floor, self.num_perm, self.min_recall))
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
            ("cluster_rule", CLUSTER_RULES),
            ("similarity", SIMILARITIES),
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
        if self.similarity == "containment":
            self._validate_containment()
        if not 0.0 < self.min_recall < 1.0:
            raise UserError(f"min_recall must be in (0, 1), got {self.min_recall}")
        for name in ("ngram", "char_ngram", "num_perm", "bucket_all_pairs_max", "bucket_kept_max"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise UserError(f"{name} must be a positive integer, got {value!r}")
        if self.bucket_all_pairs_max < 2:
            raise UserError("bucket_all_pairs_max must be >= 2")
        for name in ("id_col", "text_col"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise UserError(
                    f"{name} must be a column name, got {value!r}; in YAML or --set, quote a "
                    f'name that reads as a number or a boolean ({name}: "2026")'
                )
        if not isinstance(self.duplicates_column, str):
            raise UserError(
                f'duplicates_column must be a column name or "" (none), got '
                f"{self.duplicates_column!r}"
            )
        if self.prefer is not None and not (isinstance(self.prefer, str) and self.preference):
            raise UserError(f'prefer must be text like "quality desc", got {self.prefer!r}')

    def _validate_containment(self) -> None:
        ratio = self.containment_max_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or ratio < 1:
            raise UserError(f"containment_max_ratio must be a number >= 1, got {ratio!r}")
        if self.method != "minhash":
            raise UserError(
                f"--similarity containment works with --method minhash (got {self.method!r})"
            )
        if self.cluster_rule != "anchored":
            raise UserError(
                "--similarity containment removes a document in favour of the one containing "
                "it: it needs the anchored rule (leave out --cluster-rule components)"
            )

    @property
    def jaccard_floor(self) -> float:
        """The least Jaccard a pair the threshold keeps may have: the threshold itself, or under
        containment ``t / (1 + r - t)`` for sets ``r = containment_max_ratio`` times apart (a
        set A with ``|A n B| >= t |A|`` and ``|B| <= r |A|``): what the banding is tuned for.

        >>> round(DedupeConfig(similarity="containment").jaccard_floor, 4)
        0.0396
        """
        if self.similarity != "containment":
            return float(self.threshold)
        t = float(self.threshold)
        return t / (1.0 + float(self.containment_max_ratio) - t)

    @property
    def measure(self) -> str:
        """The scored pairs' column the threshold applies to (``jaccard`` or ``containment``)."""
        return self.similarity

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

    def settings_sha256(self) -> str:
        """SHA-256 of :meth:`settings_json`: the config hash of manifests (a nightly batch's
        ``config_hash`` is its first 16 digits)."""
        return hashlib.sha256(self.settings_json().encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DedupeConfig:
        """A config from :meth:`to_dict`'s form, as recorded in a report or manifest; keys that
        are not settings of this class (session settings, newer or older keys) are ignored."""
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        values = {k: v for k, v in data.items() if k in known}
        for key, nested in NESTED_OPTIONS.items():
            if isinstance(values.get(key), dict):
                values[key] = nested(**values[key])
        return cls(**values)


# DedupeConfig's nested sections: key -> their dataclass.
NESTED_OPTIONS: dict[str, type] = {"normalize": NormalizeOptions, "boilerplate": BoilerplateOptions}
