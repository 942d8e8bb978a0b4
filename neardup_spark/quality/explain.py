"""Explain one pair: why the job would, or would not, pair two documents.

:func:`explain` reads the two rows of the corpus with PyArrow (a dataset filter on the id
column; no Spark) and recomputes, with the job's own kernels and the same configuration
(normalisation, ``ngram``, ``seed``, ``num_perm``, banding, SimHash settings), everything the
job decides with: the shingle sets, exact Jaccard and containment, the MinHash sketches, their
estimate and the LSH bands they share, the SimHash fingerprints and their Hamming distance, and
the exact fingerprints. :func:`format_explanation` prints it for people.

The verdict follows the job's rules for ``config.method``:

* exact copies (same non-empty normalised text) are paired by the exact stage whenever the job
  collapses them (``exact_first``, the default, or ``method=exact``);
* ``minhash``: a pair is a *candidate* if the sketches agree on all ``rows`` values of at least
  one of the ``bands`` bands, and *verified* if the exact Jaccard reaches ``threshold``;
* ``simhash``: a *candidate* if the fingerprints share a block-table key, *verified* if they
  differ in at most ``hamming_k`` bits.

Paired means an edge in ``pairs/``. Two documents that are not paired may still share a cluster
through a chain of other pairs; that needs the whole corpus and is not decided here. (A band
bucket larger than ``bucket_all_pairs_max`` emits a star from its smallest id rather than all its
pairs, so a candidate pair inside such a bucket is compared through the star's centre instead.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io.finished import corpus_dataset
from neardup_spark.kernels.exact_fingerprint import exact_fingerprint, to_hex
from neardup_spark.kernels.jaccard import containment, intersection_size, jaccard
from neardup_spark.kernels.lsh import band_keys, candidate_probability
from neardup_spark.kernels.minhash import (
    MultiplyShiftFamily,
    estimate,
    signatures,
    standard_error,
)
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import ShingleSets, shingle_sets, shingle_strings
from neardup_spark.kernels.simhash import (
    cosine_from_hamming,
    hamming,
    shingle_features,
    simhash_batch,
    table_keys,
    word_features,
)
from neardup_spark.quality.generate import generated_part

SHARED_EXAMPLES = 5

VERDICT_EXACT = "exact copy"
VERDICT_PAIRED = "candidate and verified"
VERDICT_REJECTED = "candidate, not verified"
VERDICT_MISSED = "not a candidate, would have been verified"
VERDICT_NEITHER = "not a candidate"
VERDICT_DIFFERENT = "not exact copies"


def typed_id(value: Any, type_: pa.DataType, id_col: str) -> Any:
    """``value`` (often a command-line string) as a Python value of the id column's type."""
    if pa.types.is_integer(type_):
        if isinstance(value, bool):
            raise UserError(f"id {value!r} is not an integer (column {id_col!r} is {type_})")
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise UserError(
                f"id {value!r} is not an integer, but the id column {id_col!r} holds {type_}"
            ) from None
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return str(value)
    raise UserError(f"the id column {id_col!r} has type {type_}; it must be a string or integer")


def read_pair(
    input_path: str,
    id_a: Any,
    id_b: Any,
    id_col: str = "id",
    text_col: str = "text",
    input_format: str | None = None,
) -> tuple[Any, Any, str | None, str | None]:
    """``(id_a, id_b, text_a, text_b)`` with the ids cast to the id column's type; the input in
    ``input_format``, else as its files' names say.

    Reads only the two rows (dataset filter on ``id_col``). A missing id, column or input is a
    :class:`UserError` naming it.
    """
    path = generated_part(input_path, "corpus")
    dataset = corpus_dataset(path, "input", input_format)
    names = dataset.schema.names
    for role, name in (("id", id_col), ("text", text_col)):
        if name not in names:
            raise UserError(
                f"the {role} column {name!r} is not in {input_path}; columns present: "
                f"{', '.join(names)}. Choose it with --{role}-col."
            )
    id_type = dataset.schema.field(id_col).type
    a, b = typed_id(id_a, id_type, id_col), typed_id(id_b, id_type, id_col)
    table = dataset.to_table(
        columns=[id_col, text_col],
        filter=ds.field(id_col).isin(pa.array([a, b], type=id_type)),
    )
    found: dict[Any, str | None] = {}
    for key, text in zip(
        table.column(id_col).to_pylist(), table.column(text_col).to_pylist(), strict=True
    ):
        found.setdefault(key, text)
    missing = [repr(x) for x in dict.fromkeys((a, b)) if x not in found]
    if missing:
        raise UserError(
            f"id {' and '.join(missing)} not found in column {id_col!r} of {input_path}"
        )
    return a, b, found[a], found[b]


def _simhash_pair(
    normalized: pa.Array, config: DedupeConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SimHash fingerprints (uint64[2]), whether each has features, and the table keys."""
    if config.simhash_features == "words":
        offsets, hashes, weights = word_features(
            normalized,
            config.seed,
            config.simhash_hash,  # type: ignore[arg-type]
            config.simhash_weighting,  # type: ignore[arg-type]
        )
    else:
        offsets, hashes, weights = shingle_features(
            normalized,
            config.ngram,
            config.seed,
            config.simhash_hash,  # type: ignore[arg-type]
            config.simhash_weighting,  # type: ignore[arg-type]
        )
    fps = simhash_batch(offsets, hashes, weights)
    return fps, np.diff(offsets) > 0, table_keys(fps, config.blocks, config.hamming_k)


def _verdict(method: str, exact: bool, candidate: bool, verified: bool) -> str:
    if exact:
        return VERDICT_EXACT
    if method == "exact":
        return VERDICT_DIFFERENT
    if candidate:
        return VERDICT_PAIRED if verified else VERDICT_REJECTED
    return VERDICT_MISSED if verified else VERDICT_NEITHER


@dataclass(frozen=True)
class _Shingles:
    """The pair's shingle sets: hashes (what the job compares), strings (what people read)."""

    sets: ShingleSets
    shared_strings: list[str]
    inter: int
    jaccard: float

    @property
    def a(self) -> np.ndarray:
        return self.sets.doc(0)

    @property
    def b(self) -> np.ndarray:
        return self.sets.doc(1)


def _shingles(normalized: pa.Array, config: DedupeConfig) -> _Shingles:
    norm_a, norm_b = normalized.to_pylist()
    sets = shingle_sets(normalized, config.ngram, config.seed)
    set_a, set_b = sets.doc(0), sets.doc(1)
    strings_a = shingle_strings(norm_a or "", config.ngram)
    strings_b = set(shingle_strings(norm_b or "", config.ngram))
    shared = [s for s in strings_a if s in strings_b]
    return _Shingles(sets, shared, intersection_size(set_a, set_b), jaccard(set_a, set_b))


def _minhash(sh: _Shingles, config: DedupeConfig) -> dict[str, Any]:
    """MinHash and banding, exactly as the sketch stage does it."""
    bands, rows = config.banding.bands, config.banding.rows
    family = MultiplyShiftFamily.from_seed(config.num_perm, config.seed)
    sketches = signatures(sh.sets.offsets, sh.sets.hashes, family)
    both_have_shingles = bool(sh.a.size and sh.b.size)
    keys = band_keys(sketches, bands, rows)
    matched = np.flatnonzero(keys[0] == keys[1]).tolist() if both_have_shingles else []
    agreeing = int(np.count_nonzero(sketches[0] == sketches[1])) if both_have_shingles else 0
    return {
        "num_perm": config.num_perm,
        "agreeing": agreeing,
        "estimate": estimate(sketches[0], sketches[1]) if both_have_shingles else 0.0,
        "standard_error": standard_error(sh.jaccard, config.num_perm),
        "bands": bands,
        "rows": rows,
        "matched_bands": matched,
        "candidate_probability": float(candidate_probability(sh.jaccard, bands, rows)),
    }


def _simhash(normalized: pa.Array, config: DedupeConfig) -> tuple[dict[str, Any], bool]:
    """SimHash with the job's settings (default: mmh3 word hashes weighted by count), and
    whether both documents have features."""
    fps, has_features, tkeys = _simhash_pair(normalized, config)
    distance = int(hamming(fps[:1], fps[1:])[0])
    both_have_features = bool(has_features.all())
    shared_tables = np.flatnonzero(tkeys[0] == tkeys[1]).tolist() if both_have_features else []
    section = {
        "fingerprints": [to_hex(int(f)) for f in fps],
        "hamming": distance,
        "cosine_estimate": float(cosine_from_hamming(distance)),
        "hamming_k": config.hamming_k,
        "tables": int(tkeys.shape[1]),
        "shared_tables": shared_tables,
    }
    return section, both_have_features


def _decision(
    config: DedupeConfig,
    identical: bool,
    jaccard_: float,
    minhash: dict[str, Any],
    simhash: dict[str, Any],
    both_have_features: bool,
) -> dict[str, Any]:
    """``candidate``, ``verified``, ``paired`` and the verdict, by the rules of
    ``config.method`` (the exact stage pairs identical non-empty normalised texts)."""
    exact = identical and (config.method == "exact" or config.exact_first)
    if config.method == "simhash":
        candidate = bool(simhash["shared_tables"])
        verified = both_have_features and simhash["hamming"] <= config.hamming_k
    elif config.method == "minhash":
        candidate = bool(minhash["matched_bands"])
        verified = jaccard_ >= config.threshold
    else:
        candidate = verified = identical
    verdict = _verdict(config.method, exact, candidate, verified)
    paired = verdict in (VERDICT_EXACT, VERDICT_PAIRED)
    return {"candidate": candidate, "verified": verified, "paired": paired, "verdict": verdict}


def _documents(
    ids: tuple[Any, Any],
    texts: tuple[str | None, str | None],
    norms: list[str | None],
    sh: _Shingles,
    fps: tuple[int, int],
) -> list[dict[str, Any]]:
    """Per document: characters, words, distinct shingles, exact fingerprint."""
    return [
        {
            "id": doc_id,
            "chars": len(text) if text is not None else None,
            "text_is_null": text is None,
            "words": len((norm or "").split()),
            "shingles": int(n),
            "exact_fingerprint": to_hex(fp) if norm else None,
        }
        for doc_id, text, norm, n, fp in zip(ids, texts, norms, sh.sets.sizes(), fps, strict=True)
    ]


def _settings(config: DedupeConfig) -> dict[str, Any]:
    """The settings the explanation used."""
    return {
        "ngram": config.ngram,
        "seed": config.seed,
        "num_perm": config.num_perm,
        "threshold": config.threshold,
        "bands": config.banding.bands,
        "rows": config.banding.rows,
        "hamming_k": config.hamming_k,
        "blocks": config.blocks,
        "simhash": f"{config.simhash_features}/{config.simhash_hash}/{config.simhash_weighting}",
        "exact_first": config.exact_first,
    }


def explain(
    input_path: str,
    id_a: Any,
    id_b: Any,
    config: DedupeConfig,
    shared_examples: int = SHARED_EXAMPLES,
    input_format: str | None = None,
) -> dict[str, Any]:
    """Everything the job computes about the pair ``(id_a, id_b)`` of ``input_path`` (in
    ``input_format``, else as its files' names say).

    Ids may be given as strings (from the command line) or as values of the id column's type;
    they are cast to that type. Returns a dict with ``ids``, ``config`` (the settings used),
    ``documents`` (per document: characters, words, distinct shingles, exact fingerprint),
    ``shingles`` (shared, union, ``examples`` of shared shingle strings), ``jaccard``,
    ``containment_a_in_b``, ``containment_b_in_a``, ``minhash`` (estimate, agreeing values,
    standard error, ``matched_bands``, candidate probability), ``simhash`` (fingerprints,
    ``hamming``, shared tables), ``exact_copy``, ``candidate``, ``verified``, ``paired``
    and ``verdict``.
    """
    a, b, text_a, text_b = read_pair(
        input_path, id_a, id_b, config.id_col, config.text_col, input_format
    )
    normalized = normalize_texts(pa.array([text_a, text_b], pa.large_string()), config.normalize)
    norm_a, norm_b = normalized.to_pylist()
    sh = _shingles(normalized, config)
    minhash = _minhash(sh, config)
    simhash, both_have_features = _simhash(normalized, config)
    fp_a, fp_b = exact_fingerprint(norm_a), exact_fingerprint(norm_b)
    identical = bool(norm_a) and fp_a == fp_b and norm_a == norm_b
    decision = _decision(config, identical, sh.jaccard, minhash, simhash, both_have_features)
    return {
        "input": input_path,
        "ids": [a, b],
        "method": config.method,
        "config": _settings(config),
        "documents": _documents((a, b), (text_a, text_b), [norm_a, norm_b], sh, (fp_a, fp_b)),
        "shingles": {
            "shared": sh.inter,
            "union": int(sh.a.size + sh.b.size - sh.inter),
            "examples": sh.shared_strings[: max(shared_examples, 0)],
        },
        "jaccard": sh.jaccard,
        "containment_a_in_b": containment(sh.a, sh.b),
        "containment_b_in_a": containment(sh.b, sh.a),
        "minhash": minhash,
        "simhash": simhash,
        "exact_copy": identical,
        **decision,
    }


def _pct(x: float) -> str:
    return f"{x:.4f}"


def format_explanation(d: dict[str, Any]) -> str:
    """A readable account of :func:`explain`'s result."""
    a, b = d["documents"]
    cfg, mh, sh, sg = d["config"], d["minhash"], d["simhash"], d["shingles"]
    lines = [f"pair      {a['id']!r}  ~  {b['id']!r}   ({d['method']} run)", ""]
    for label, doc in (("A", a), ("B", b)):
        if doc["text_is_null"]:
            lines.append(f"{label}         null text")
            continue
        lines.append(
            f"{label}         {doc['chars']:,} characters, {doc['words']:,} words, "
            f"{doc['shingles']:,} distinct {cfg['ngram']}-word shingles"
        )
    lines += [
        "",
        f"shingles  {sg['shared']:,} shared of {sg['union']:,} in the union",
    ]
    for example in sg["examples"]:
        lines.append(f"          · {example}")
    lines += [
        f"jaccard   {_pct(d['jaccard'])}  (threshold {cfg['threshold']:g})",
        f"contain.  A in B {_pct(d['containment_a_in_b'])}, B in A {_pct(d['containment_b_in_a'])}",
        "",
        f"minhash   estimate {_pct(mh['estimate'])} ({mh['agreeing']} of {mh['num_perm']} values "
        f"agree; standard error at this J {mh['standard_error']:.3f}; seed {cfg['seed']})",
    ]
    matched = mh["matched_bands"]
    shown = ", ".join(str(i) for i in matched[:20]) + (" ..." if len(matched) > 20 else "")
    lines.append(
        f"bands     {len(matched)} of {mh['bands']} bands of {mh['rows']} match"
        + (f": {shown}" if matched else "")
        + f"  (P[candidate] at this J: {mh['candidate_probability']:.4f})"
    )
    lines += [
        f"simhash   {sh['fingerprints'][0]} vs {sh['fingerprints'][1]}: "
        f"{sh['hamming']} differing bits (limit {sh['hamming_k']}; cosine ~ "
        f"{sh['cosine_estimate']:.3f}; {len(sh['shared_tables'])} of {sh['tables']} "
        f"tables shared; {cfg['simhash']})",
        f"exact     {'identical after normalisation' if d['exact_copy'] else 'different texts'}",
        "",
        f"verdict   {d['verdict']}: the job would "
        + (
            "PAIR them"
            if d["paired"]
            else "NOT pair them (they may still share a cluster through other documents)"
        ),
    ]
    return "\n".join(lines) + "\n"
