"""``neardup fingerprint TEXT``: the exact fingerprint, SimHash or MinHash sketch of one text,
as the job computes them (the seed article's worked examples)."""

from __future__ import annotations

import argparse
from typing import Any

import pyarrow as pa

from neardup_spark.cli.options import add_settings_options
from neardup_spark.config import METHODS, DedupeConfig, build_config
from neardup_spark.errors import EXIT_OK
from neardup_spark.kernels.exact_fingerprint import exact_fingerprint, to_hex
from neardup_spark.kernels.minhash import MultiplyShiftFamily, signatures
from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.kernels.shingles import shingle_sets
from neardup_spark.kernels.simhash import simhash_text


def register(sub: Any) -> None:
    parser = sub.add_parser("fingerprint", help="print the fingerprint or sketch of one text")
    parser.add_argument("text", help="the text (quote it)")
    parser.add_argument("--method", choices=METHODS, default="simhash")
    parser.add_argument(
        "--hash",
        choices=("default", "md5"),
        default="default",
        help="simhash feature hash: default (seeded mmh3, words weighted by count) "
        "or md5 (the seed article's reference: MD5 of each word, weight 1)",
    )
    parser.add_argument("--ngram", type=int, help="words per shingle (minhash)")
    parser.add_argument("--seed", type=int, help="hash seed (simhash default hash, minhash)")
    add_settings_options(parser, master=False)
    parser.set_defaults(func=run_fingerprint)


def text_signature_lines(text: str, method: str, hash_name: str, config: DedupeConfig) -> list[str]:
    """What ``neardup fingerprint`` prints for one text."""
    normalized = normalize_text(text, config.normalize) or ""
    if method == "exact":
        return [to_hex(exact_fingerprint(normalized))]
    if method == "simhash":
        if hash_name == "md5":  # the seed article's reference: MD5 of words, weight 1 each
            return [to_hex(simhash_text(text, "md5", "binary", options=config.normalize))]
        fp = simhash_text(
            text,
            "mmh3",
            config.simhash_weighting,  # type: ignore[arg-type]
            seed=config.seed,
            options=config.normalize,
        )
        return [to_hex(fp)]
    sets = shingle_sets(pa.array([normalized], pa.large_string()), config.ngram, config.seed)
    family = MultiplyShiftFamily.from_seed(config.num_perm, config.seed)
    sketch_values = signatures(sets.offsets, sets.hashes, family)[0]
    shown = " ".join(f"{v:08x}" for v in sketch_values[:8].tolist())
    return [
        f"shingles   {int(sets.sizes()[0])} distinct word {config.ngram}-shingles",
        f"sketch     {config.num_perm} MinHash values (seed {config.seed})",
        f"first 8    {shown}",
        f"banding    {config.banding.bands} bands x {config.banding.rows} rows",
    ]


def run_fingerprint(args: argparse.Namespace) -> int:
    config = build_config(args.config, args.overrides, {"ngram": args.ngram, "seed": args.seed})
    print("\n".join(text_signature_lines(args.text, args.method, args.hash, config)))
    return EXIT_OK
