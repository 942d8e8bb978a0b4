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


def growing_documents(
    threads: int, versions: int, quotes: int, unrelated: int, seed: int
) -> pa.Table:
    """What containment is for: ``threads`` documents that grow by ~8 % a version over
    ``versions`` versions (a thread gaining replies, an article updated: each version contains
    the one before), ``quotes`` excerpts quoted whole inside longer articles (a paragraph of 5 to
    60 % of its article, up to 1:20 in size), and ``unrelated`` other documents."""
    rng = random.Random(seed)
    base, _ = generate_corpus(threads * 3 + 2 * quotes + unrelated, seed=seed, mean_words=120)
    texts = base.column("text").to_pylist()
    ids, bodies = [], []
    for thread in range(threads):
        pool = " ".join(texts[3 * thread : 3 * thread + 3]).split()
        size = max(20, len(pool) // 4)
        for version in range(versions):
            ids.append(f"g{thread:03d}v{version}")
            bodies.append(" ".join(pool[:size]))
            size = min(len(pool), size + max(2, round(size * 0.08)))
    start = 3 * threads
    for quote in range(quotes):
        article = " ".join(texts[start + 2 * quote : start + 2 * quote + 2]).split()
        share = rng.uniform(0.05, 0.6)
        length = max(12, int(len(article) * share))
        at = rng.randrange(0, len(article) - length + 1)
        ids.append(f"q{quote:03d}article")
        bodies.append(" ".join(article))
        ids.append(f"q{quote:03d}quote")
        bodies.append(" ".join(article[at : at + length]))
    for other in range(unrelated):
        ids.append(f"u{other:04d}")
        bodies.append(texts[start + 2 * quotes + other])
    return pa.table({"id": ids, "text": bodies})
