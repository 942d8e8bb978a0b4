"""Chains of revised documents: what the anchored rule is for (J ~ 0.9 between neighbouring
versions, falling along a chain, so that the connected components span whole chains)."""

from __future__ import annotations

import random

import pyarrow as pa

from neardup_spark.quality.generate import generate_corpus

NIGHTS = 3


def revision_chains(chains: int, versions: int, unrelated: int, seed: int) -> pa.Table:
    """``chains`` articles taken through ``versions`` revisions (one word replaced each: J ~ 0.9
    with the next version, falling along the chain), ``unrelated`` other documents, and the
    night each document arrives in (at random: a later version may come first)."""
    rng = random.Random(seed)
    base, _ = generate_corpus(chains + unrelated, seed=seed, mean_words=100)
    texts = base.column("text").to_pylist()
    ids, bodies = [], []
    for chain in range(chains):
        words = texts[chain].split()
        for version in range(versions):
            ids.append(f"c{chain:03d}v{version}")
            bodies.append(" ".join(words))
            words = list(words)
            words[rng.randrange(len(words))] = f"edit{chain}x{version}"
    for other in range(unrelated):
        ids.append(f"u{other:04d}")
        bodies.append(texts[chains + other])
    nights = [rng.randrange(1, NIGHTS + 1) for _ in ids]
    return pa.table({"id": ids, "text": bodies, "night": pa.array(nights, pa.int32())})
