"""The settings an index is bound to, and the probe that catches a change of the hashing code."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pyarrow as pa

from neardup_spark.batch.minhash import minhash_columns_fn
from neardup_spark.batch.text import text_columns_fn
from neardup_spark.columns import BAND_KEYS, DOC_ID, EXACT_FP, SHINGLES, SKETCH, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.shingles import SHINGLE_HASH_VERSION

# Settings that never change what an index holds, so a run may differ from the index in them.
# Everything else in DedupeConfig.settings_json() must match (new settings are compared by default).
NEUTRAL_SETTINGS = frozenset(
    {
        "id_col",
        "text_col",
        "exact_first",
        "components_single_task_max_edges",
        "nightly_driver_max_docs",
        "nightly_driver_scan_max_rows",
        "driver_read_max_bytes",
        "driver_max_docs",
        "index_check",
        "duplicates_column",  # a column of the published deduplicated/, not of the index
        "bucket_all_pairs_max",
        "bucket_kept_max",  # a full run's large buckets under the anchored rule; nights: not yet
        "min_recall",  # only derives bands/rows, which are compared themselves
        "hamming_k",
        "blocks",
        "simhash_features",
        "simhash_hash",
        "simhash_weighting",
        "prefer",  # refused with --index (nightly/run.py): the index's ids stay smallest_id's
        # --index refuses --strip-boilerplate (run.check_incremental_config): never stored.
        "strip_boilerplate",
        "boilerplate",
    }
)


SETTING_LABELS = {
    "normalize": "normalisation",
    "ngram": "shingling (ngram)",
    "char_ngram": "shingling (char_ngram)",
    "shingle_unit": "shingling (shingle_unit)",
    "num_perm": "num_perm",
    "seed": "seed",
    "bands": "banding (bands)",
    "rows": "banding (rows)",
    "threshold": "threshold",
    "shingle_hash_version": "shingle hash version",
    "method": "method",
    "representative": "representative",
    "cluster_rule": "cluster rule",
    "exact_compare_text": "exact_compare_text",
}


def probe_digest(config: DedupeConfig) -> str:
    """SHA-256 (16 hex digits) of what the job's own fingerprint and sketch stages make of a few
    fixed texts under ``config``: exact fingerprints, shingle hashes, MinHash sketches, band keys.

    Recorded in the manifest and recomputed by every run, so a change of the normalisation,
    shingling, MinHash or banding *code* (not only of a setting) is caught as well.
    """
    texts = [
        "The quick brown fox jumps over the lazy dog, twice: the QUICK brown fox!",
        "Crawlers fetch pages; near-duplicate pages waste the index.  Straße ﬁle",
        "short",
        "日本語のテキストはスペースなしで書かれます",
        "",
    ]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(range(len(texts)), pa.int64()), pa.array(texts, pa.string())],
        names=[DOC_ID, TEXT],
    )
    fingerprinted = text_columns_fn(config.normalize, config.shingle_unit)(batch)
    sketched = minhash_columns_fn(config)(fingerprinted)
    digest = hashlib.sha256()
    for column in (
        fingerprinted.column(EXACT_FP),
        sketched.column(SHINGLES),
        sketched.column(SKETCH),
        sketched.column(BAND_KEYS),
    ):
        digest.update(str(column.to_pylist()).encode())
    return digest.hexdigest()[:16]


def index_settings(config: DedupeConfig) -> dict[str, Any]:
    """The settings an index is bound to: every result-deciding setting of
    ``config.settings_json()`` but :data:`NEUTRAL_SETTINGS`, plus the shingle hash version and the
    hashing probe (:func:`probe_digest`)."""
    settings = {
        k: v for k, v in json.loads(config.settings_json()).items() if k not in NEUTRAL_SETTINGS
    }
    settings["shingle_hash_version"] = SHINGLE_HASH_VERSION
    settings["hash_probe"] = probe_digest(config)
    return settings


def settings_differences(built: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """Human-readable differences between an index's settings and a run's."""
    out = []
    # indexes of 0.4 and before: components; of 0.5 and before: Jaccard (no containment keys)
    built = {
        "cluster_rule": "components",
        "similarity": "jaccard",
        "containment_max_ratio": 20.0,
        **built,
    }
    for key in sorted(set(built) | set(wanted)):
        if key == "hash_probe":
            continue
        a, b = built.get(key), wanted.get(key)
        if a == b:
            continue
        label = SETTING_LABELS.get(key, key)
        if isinstance(a, dict) and isinstance(b, dict):
            subs = ", ".join(
                f"{key}.{s}: index {a.get(s)!r}, this run {b.get(s)!r}"
                for s in sorted(set(a) | set(b))
                if a.get(s) != b.get(s)
            )
            out.append(f"{label} ({subs})")
        elif key == "cluster_rule":
            out.append(f"{label} (index {a!r}, this run {b!r}: run with --cluster-rule {a})")
        else:
            out.append(f"{label} (index {a!r}, this run {b!r})")
    if not out and built.get("hash_probe") != wanted.get("hash_probe"):
        out.append(
            "hashing code (the normalisation, shingle, MinHash or band-key code changed since "
            f"the index was built: probe {built.get('hash_probe')} != {wanted.get('hash_probe')})"
        )
    return out
