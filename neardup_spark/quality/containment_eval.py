"""Documents inside other documents, and how a run finds them (``make eval-containment``).

Forum threads and articles that grow (each version holds the one before and ~8 % more), and
paragraphs quoted whole inside longer articles (5 to 60 % of the article: up to 1:20 in size),
made from any texts (the real articles of ``../shared/data``), among unrelated documents.
:func:`score_containment` scores a run's ``pairs/`` and ``clusters/`` on them against the exact
containment of every pair (:mod:`.oracle`'s shingle sets):

* ``recall``: the share of the pairs contained at >= the threshold, sizes at most
  ``containment_max_ratio`` apart, that ``pairs/`` holds (as it holds them: exact copies by
  their group's smallest id, a near pair between the groups' smallest ids);
* ``precision``: the share of ``pairs/``'s near-duplicate rows contained at >= the threshold;
* ``removed_contained``: the share of removed documents contained at >= the threshold in the
  document kept in their place, and no larger than it;
* ``kept_contained_pairs``: pairs of kept documents, one contained in the other at >= the
  threshold + 0.05.
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
import scipy.sparse as sp

from neardup_spark.config import DedupeConfig, build_config
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.quality.oracle import shingle_matrix
from neardup_spark.quality.revisions import article_texts
from neardup_spark.runtime.session import build_session

GROWTH = 0.08  # each version's new text, as a share of the one before


def growing_corpus(texts: list[str], unrelated: list[str], seed: int = 11) -> pa.Table:
    """Each text as a growing document (5-10 versions, the first a quarter to a half of it,
    each ~8 % longer) or, every third one, as an article with one paragraph of it quoted
    whole elsewhere (5 to 60 % of the article), among the ``unrelated``: ``id``, ``text``."""
    rng = random.Random(seed)
    ids, bodies = [], []
    for number, text in enumerate(texts):
        words = text.split()
        if len(words) < 60 or len(text) > 15 * len(words):
            continue  # too short, or a script written without spaces (shingled by characters)
        if number % 3 == 2:
            length = max(12, int(len(words) * rng.uniform(0.05, 0.6)))
            at = rng.randrange(0, len(words) - length + 1)
            ids += [f"a{number:04d}-article", f"a{number:04d}-quote"]
            bodies += [text, " ".join(words[at : at + length])]
            continue
        size = int(len(words) * rng.uniform(0.25, 0.5))
        for version in range(rng.randint(5, 10)):
            ids.append(f"a{number:04d}-v{version:02d}")
            bodies.append(" ".join(words[:size]))
            size = min(len(words), size + max(2, round(size * GROWTH)))
    ids += [f"u{number:05d}" for number in range(len(unrelated))]
    return pa.table({"id": ids, "text": bodies + unrelated})


def contained_pairs(texts: pa.Array, config: DedupeConfig) -> tuple[np.ndarray, ...]:
    """Every pair sharing a shingle: ``i < j``, the containment of the smaller set in the
    larger, the size ratio (larger / smaller); and the sets' sizes."""
    matrix = shingle_matrix(texts, config.ngram, config.seed, config.normalize)
    shared = matrix.shared.astype(np.int32)
    inter = sp.triu(shared @ shared.T, k=1).tocoo()
    i, j, both = inter.row.astype(np.int64), inter.col.astype(np.int64), inter.data
    small = np.minimum(matrix.sizes[i], matrix.sizes[j])
    large = np.maximum(matrix.sizes[i], matrix.sizes[j])
    return i, j, both / np.maximum(small, 1), large / np.maximum(small, 1), matrix.sizes


def score_containment(
    ids: list[Any], texts: pa.Array, out: Path, config: DedupeConfig
) -> dict[str, Any]:
    """Scores of one run's ``pairs/`` and ``clusters/`` (module docstring); the threshold is
    read as a containment whatever the run measured."""
    t = config.threshold
    i, j, contained, ratio, sizes = contained_pairs(texts, config)
    at = {doc: k for k, doc in enumerate(ids)}
    wanted = (contained >= t) & (ratio <= config.containment_max_ratio)
    truth = {(int(a), int(b)) for a, b in zip(i[wanted], j[wanted], strict=True)}
    value = {(int(a), int(b)): c for a, b, c in zip(i, j, contained, strict=True)}
    pairs = pq.read_table(out / "pairs", columns=["doc_a", "doc_b", "method"])
    rows = zip(*(pairs.column(c).to_pylist() for c in ("doc_a", "doc_b", "method")), strict=True)
    content = {}  # a document's exact-copy group, by its smallest id (pairs/ names groups so)
    near = []
    for a, b, method in rows:
        if method == "exact":
            content[at[b]] = at[a]
        else:
            near.append((at[a], at[b]))
    found_contents = {(min(a, b), max(a, b)) for a, b in near}

    def found(a: int, b: int) -> bool:
        x, y = content.get(a, a), content.get(b, b)
        return x == y or (min(x, y), max(x, y)) in found_contents

    reported = {(min(a, b), max(a, b)) for a, b in near}
    clusters = pq.read_table(out / "clusters", columns=["doc_id", "cluster_id"])
    kept_of = dict(zip(*(c.to_pylist() for c in clusters.columns), strict=True))
    removed = [(at[d], at[k]) for d, k in kept_of.items() if d != k]
    held = [
        value.get((min(d, k), max(d, k)), 0.0) >= t and sizes[d] <= sizes[k] for d, k in removed
    ]
    kept = np.array([kept_of[doc] == doc for doc in ids])
    strong = (contained >= t + 0.05) & kept[i] & kept[j]
    return {
        "documents": len(ids),
        "contained_pairs": len(truth),
        "largest_ratio": float(ratio[wanted].max()) if wanted.any() else 0.0,
        "recall": sum(found(a, b) for a, b in truth) / len(truth) if truth else 1.0,
        "precision": float(np.mean([value.get(p, 0.0) >= t for p in reported]))
        if reported
        else 1.0,
        "removed": len(removed),
        "removed_contained": float(np.mean(held)) if held else 1.0,
        "kept_contained_pairs": int(strong.sum()),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m neardup_spark.quality.containment_eval [DATA] [WORKDIR]``: growing
    documents and quotes of the real articles of DATA (else of generated documents) among 3,000
    generated documents, run with each similarity at the defaults; prints the scores."""
    args = argv if argv is not None else sys.argv[1:]
    data = Path(args[0] if args else "../shared/data")
    work = Path(args[1] if len(args) > 1 else "out/eval-containment")
    generated, _ = generate_corpus(3400, seed=17, mean_words=300)
    texts = generated.column("text").to_pylist()
    articles = article_texts(data) or texts[3000:]
    corpus = growing_corpus(articles, texts[:3000])
    source = "real articles" if article_texts(data) else "generated documents"
    print(f"{corpus.num_rows:,} documents: growing and quoted {len(articles)} {source}")
    work.mkdir(parents=True, exist_ok=True)
    pq.write_table(corpus, work / "corpus.parquet")
    spark = build_session(app_name="neardup-eval-containment")
    for similarity in ("containment", "jaccard"):
        config = build_config(options={"similarity": similarity})
        out = work / similarity
        report = run(spark, str(work / "corpus.parquet"), str(out), config, overwrite=True)
        ids = corpus.column("id").to_pylist()
        scores = score_containment(ids, corpus.column("text"), out, config)
        scores["work_seconds"] = report["wall_seconds"]
        scores["candidate_pairs"] = report["counts"]["candidate_pairs"]
        print(similarity, json.dumps(scores))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
