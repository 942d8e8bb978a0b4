"""Chains of revised documents, and how well a run's removals hold up on them.

A news story updated through the day, a wiki article edited, a forum thread that grows: each
version is a near-duplicate of the next (Jaccard ~ 0.89 at word 5-shingles) but shares less and
less with the far end of its chain. Connected components join a whole chain and remove versions
that share little with anything kept; the anchored rule must not. :func:`revision_chains` makes
such a corpus from any texts; :func:`score_removals` scores a run's ``clusters/`` on it by exact
Jaccard (:mod:`.oracle`), the way issue 44's reviewer does:

* ``justified``: the share of removed documents with Jaccard >= the threshold with their
  cluster's kept document;
* ``justified_by_any``: ... with any kept document, at the threshold minus 0.02;
* ``kept_near_pairs``: pairs of kept documents with Jaccard >= the threshold + 0.05;
* ``greedy_kept``: what the sequential greedy in id order over the exact pairs keeps (a set
  meeting both conditions), and ``kept_vs_greedy``.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup_spark.config import DedupeConfig, build_config
from neardup_spark.kernels.anchored import anchors
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.quality.oracle import shingle_matrix, similar_pairs
from neardup_spark.runtime.session import build_session

# Word edits per revision, as a share of the text's words: J ~ 0.89 with the next version at
# word 5-shingles (each edit changes up to 5 shingles: (n - 5e) / (n + 5e) ~ 0.89).
EDIT_SHARE = 0.012


def revise(words: list[str], edits: int, rng: random.Random, tag: str) -> list[str]:
    """``words`` after ``edits`` random edits: a word replaced, a word inserted, or one dropped."""
    out = list(words)
    for i in range(edits):
        kind = rng.random()
        at = rng.randrange(len(out))
        if kind < 0.5:
            out[at] = f"{tag}r{i}"
        elif kind < 0.8 or len(out) < 20:
            out.insert(at, f"{tag}i{i}")
        else:
            del out[at]
    return out


def revision_chains(
    texts: list[str], unrelated: list[str], versions: tuple[int, int] = (5, 10), seed: int = 7
) -> pa.Table:
    """Each of ``texts`` taken through 5-10 revisions (``versions``), ids in revision order
    (``a0003-v02``), mixed with the ``unrelated`` documents (``u00017``): ``id``, ``text``,
    ``chain`` (its number, -1 for an unrelated document)."""
    rng = random.Random(seed)
    ids, bodies, chains = [], [], []
    for number, text in enumerate(texts):
        words = text.split()
        if len(words) < 40 or len(text) > 15 * len(words):
            # too short, or a script written without spaces (the job shingles it by
            # characters, the word edits and the oracle's word shingles would not apply)
            continue
        edits = max(1, round(len(words) * EDIT_SHARE))
        for version in range(rng.randint(*versions)):
            ids.append(f"a{number:04d}-v{version:02d}")
            bodies.append(" ".join(words))
            chains.append(number)
            words = revise(words, edits, rng, f"e{number}x{version}")
    for number, text in enumerate(unrelated):
        ids.append(f"u{number:05d}")
        bodies.append(text)
        chains.append(-1)
    return pa.table({"id": ids, "text": bodies, "chain": pa.array(chains, pa.int32())})


def score_removals(
    ids: list[Any], texts: pa.Array, kept_of: dict[Any, Any], config: DedupeConfig
) -> dict[str, Any]:
    """Scores of one run's clusters (``kept_of``: each document's ``cluster_id``) against the
    exact Jaccard of every pair (module docstring)."""
    matrix = shingle_matrix(texts, config.ngram, config.seed, config.normalize)
    at = {doc: i for i, doc in enumerate(ids)}
    cluster = np.array([at[kept_of[doc]] for doc in ids])
    i, j, jaccard = similar_pairs(matrix, config.threshold - 0.02)
    kept = cluster == np.arange(len(ids))
    removed = np.flatnonzero(~kept)
    to_own = matrix.jaccard(removed, cluster[removed])
    near_kept = np.zeros(len(ids), bool)  # removed, with a kept document at >= t - 0.02
    for x, y in ((i, j), (j, i)):
        near_kept[x[kept[y]]] = True
    both = kept[i] & kept[j] & (jaccard >= config.threshold + 0.05)
    greedy = greedy_keep(len(ids), i[jaccard >= config.threshold], j[jaccard >= config.threshold])
    n_removed = int(removed.size)
    return {
        "documents": len(ids),
        "removed": n_removed,
        "justified": float(np.mean(to_own >= config.threshold)) if n_removed else 1.0,
        "justified_by_any": float(np.mean(near_kept[removed])) if n_removed else 1.0,
        "kept": int(kept.sum()),
        "kept_near_pairs": int(both.sum()),
        "greedy_kept": greedy,
        "kept_vs_greedy": float(kept.sum() / greedy) if greedy else 1.0,
    }


def greedy_keep(n: int, a: np.ndarray, b: np.ndarray) -> int:
    """How many of ``n`` documents the sequential greedy in index order keeps over the edges."""
    return int(np.count_nonzero(anchors(n, a, b) == np.arange(n)))


def article_texts(data: Path) -> list[str]:
    """The gold article bodies of ``../shared/data`` (181 real articles), when present."""
    path = data / "html" / "article-extraction-benchmark.parquet"
    if not path.is_file():
        return []
    bodies = pq.read_table(path, columns=["article_body"]).column(0).to_pylist()
    return [body for body in bodies if body]


def main(argv: list[str] | None = None) -> int:
    """``python -m neardup_spark.quality.revisions [DATA] [WORKDIR]``: chains of the real
    articles of DATA (else of generated documents) among 3,000 generated unrelated documents,
    deduplicated with each rule at the defaults; prints each rule's scores."""
    args = argv if argv is not None else sys.argv[1:]
    data = Path(args[0] if args else "../shared/data")
    work = Path(args[1] if len(args) > 1 else "out/eval-removals")
    generated, _ = generate_corpus(3400, seed=13, mean_words=300)
    texts = generated.column("text").to_pylist()
    articles = article_texts(data) or texts[3000:]
    corpus = revision_chains(articles, texts[:3000])
    source = "real articles" if article_texts(data) else "generated documents"
    print(f"{corpus.num_rows:,} documents: chains of {len(articles)} {source}, 3,000 unrelated")
    work.mkdir(parents=True, exist_ok=True)
    pq.write_table(corpus, work / "corpus.parquet")
    spark = build_session(app_name="neardup-eval-removals")
    for rule in ("anchored", "components"):
        config = build_config(options={"cluster_rule": rule})
        out = work / rule
        run(spark, str(work / "corpus.parquet"), str(out), config, overwrite=True)
        clusters = pq.read_table(out / "clusters", columns=["doc_id", "cluster_id"])
        kept_of = dict(zip(*(c.to_pylist() for c in clusters.columns), strict=True))
        ids = corpus.column("id").to_pylist()
        scores = score_removals(ids, corpus.column("text"), kept_of, config)
        print(rule, json.dumps(scores))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
