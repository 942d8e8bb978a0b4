"""The largest clusters of a finished run as ``report.html`` shows them: each cluster's members
in breadth-first order from the representative along the verified pairs (``hops`` = number of
pairs on the way, ``linked_to`` = the member it was reached from), with a snippet of each text
and its exact Jaccard to the representative, computed from the texts with the job's own
kernels. A member far from the representative but linked to a close neighbour is a chain:
A ~ B ~ C with A and C not similar themselves.

Only the texts of the members shown are read from the corpus (a PyArrow dataset filter on the
id column); a corpus that cannot be read leaves the snippets out, it does not fail the report.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from neardup_spark.columns import CLUSTER_ID, DOC_ID
from neardup_spark.errors import UserError
from neardup_spark.io.finished import corpus_dataset, require_columns
from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.normalize import NormalizeOptions, normalize_texts
from neardup_spark.kernels.shingles import shingle_sets
from neardup_spark.kernels.simhash import hamming, simhash_text

SNIPPET_CHARS = 200

# Graph of verified pairs inside the largest clusters: doc -> [(other doc, similarity)].
Links = dict[Any, list[tuple[Any, float]]]
# One member as the breadth-first walk reached it: (doc, reached from, link similarity, hops).
Reached = tuple[Any, Any, float | None, int]


def cluster_members(removed: pa.Table, top_table: pa.Table) -> dict[Any, set[Any]]:
    """``{cluster_id: its documents}`` of the clusters of ``top_table`` (the representative's
    id is the cluster id), from the non-representative rows ``removed``."""
    top_ids = top_table.column(CLUSTER_ID).to_pylist()
    member_rows = removed.filter(
        pc.is_in(
            removed.column(CLUSTER_ID).combine_chunks(),
            value_set=top_table.column(CLUSTER_ID).combine_chunks(),
        )
    )
    members_of: dict[Any, set[Any]] = {cid: {cid} for cid in top_ids}
    for doc, cid in zip(
        member_rows.column(DOC_ID).to_pylist(),
        member_rows.column(CLUSTER_ID).to_pylist(),
        strict=True,
    ):
        members_of[cid].add(doc)
    return members_of


def resolve_corpus(report: dict[str, Any], output: str, input_path: str | None) -> str | None:
    """Where the run's texts are: ``input_path``, else the input ``report.json`` records
    (a relative one is tried next to the output too); None when neither is known."""
    if input_path:
        return input_path
    recorded = report.get("input")
    if not recorded:
        return None
    if "://" in recorded or os.path.isabs(recorded) or os.path.exists(recorded):
        return str(recorded)
    # A relative path recorded by a run started elsewhere: try it next to the output.
    beside = os.path.join(os.path.dirname(os.path.abspath(output.rstrip("/"))), recorded)
    return beside if os.path.exists(beside) else str(recorded)


def read_texts(
    corpus: str,
    id_col: str,
    text_col: str,
    ids: Sequence[Any],
    input_format: str | None = None,
    skipped: frozenset[str] = frozenset(),
) -> tuple[dict[Any, str | None], str | None]:
    """Texts of ``ids`` read with a dataset filter; ``({id: text}, problem or None)``. The
    corpus is in the format its files' names say, else ``input_format`` (the run's
    ``--input-format``); ``skipped``: the files the run skipped whole."""
    try:
        dataset = corpus_dataset(corpus, fallback=input_format, skipped=skipped)
        require_columns(dataset.schema, (id_col, text_col), "corpus", corpus)
        id_type = dataset.schema.field(id_col).type
        table = dataset.to_table(
            columns=[id_col, text_col],
            filter=ds.field(id_col).isin(pa.array(list(ids)).cast(id_type)),
        )
    except (UserError, pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        return {}, str(exc)
    keys = table.column(id_col).to_pylist()
    texts = table.column(text_col).to_pylist()
    return dict(zip(keys, texts, strict=True)), None


def bfs_order(representative: Any, members: set[Any], links: Links, limit: int) -> list[Reached]:
    """Members in breadth-first order from the representative along verified pairs, the
    strongest link first: ``(member, reached from, that pair's similarity, hops)``. Members the
    pairs do not reach (should not happen) follow in id order with ``hops`` -1."""
    order: list[Reached] = [(representative, None, None, 0)]
    seen = {representative}
    queue: deque[tuple[Any, int]] = deque([(representative, 0)])
    while queue and len(order) < limit:
        node, hops = queue.popleft()
        for other, sim in sorted(links.get(node, []), key=lambda e: (-e[1], str(e[0]))):
            if other in seen or other not in members:
                continue
            seen.add(other)
            order.append((other, node, sim, hops + 1))
            queue.append((other, hops + 1))
            if len(order) >= limit:
                break
    if len(order) < limit:
        for other in sorted(members - seen, key=str)[: limit - len(order)]:
            order.append((other, None, None, -1))
    return order


def snippet(text: str | None, chars: int = SNIPPET_CHARS) -> str | None:
    """The first ``chars`` characters of ``text`` with its spacing flattened (``…`` if cut)."""
    if text is None:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[:chars].rstrip() + "…"


def member_similarities(
    config: dict[str, Any], method: str, texts: list[str | None]
) -> tuple[list[float], list[int], list[int | None]]:
    """Exact Jaccard of each text to ``texts[0]`` (the representative), distinct shingle
    counts, and (SimHash runs) the Hamming distance of the SimHash fingerprints, with the
    run's normalisation, shingle size and seed."""
    norm = config.get("normalize") or {}
    known = set(NormalizeOptions.__dataclass_fields__)
    options = NormalizeOptions(**{k: bool(v) for k, v in norm.items() if k in known})
    ngram, seed = int(config.get("ngram", 5)), int(config.get("seed", 42))
    sets = shingle_sets(normalize_texts(pa.array(texts, pa.large_string()), options), ngram, seed)
    rep = sets.doc(0)
    sims = [jaccard(rep, sets.doc(i)) for i in range(len(sets))]
    sizes = [int(s) for s in sets.sizes()]
    distances: list[int | None] = [None] * len(texts)
    if method == "simhash":
        fps = [
            simhash_text(
                t,
                config.get("simhash_hash", "mmh3"),
                config.get("simhash_weighting", "binary"),
                seed=seed,
                shingle_k=ngram if config.get("simhash_features") == "shingles" else None,
                options=options,
            )
            for t in texts
        ]
        as_u64 = np.array(fps, dtype=np.uint64)
        distances = [int(d) for d in hamming(as_u64[:1], as_u64)]
    return sims, sizes, distances


def below_threshold(
    config: dict[str, Any], method: str, jac: float | None, bits: int | None
) -> bool | None:
    """Would this member, compared with the representative directly, fail verification?"""
    if method == "simhash":
        return None if bits is None else bits > int(config.get("hamming_k", 3))
    if method == "minhash":
        return None if jac is None else jac < float(config.get("threshold", 0.8))
    return None if jac is None else jac < 1.0


def cluster_entry(
    config: dict[str, Any],
    method: str,
    cluster: tuple[Any, int],
    order: list[Reached],
    texts: dict[Any, str | None],
) -> dict[str, Any]:
    """One of ``top_clusters``: ``cluster = (id, size)`` with its members in ``order``, each
    with its snippet and its similarity to the representative when the texts are known."""
    have = [m in texts for m, _, _, _ in order]
    member_texts = [texts.get(m) for m, _, _, _ in order]
    if have[0]:
        sims, n_shingles, distances = member_similarities(config, method, member_texts)
    else:
        sims, n_shingles, distances = [], [], []
    members = []
    for i, (doc, parent, link_sim, hops) in enumerate(order):
        known = bool(have[0] and have[i])
        members.append(
            {
                "doc_id": doc,
                "is_representative": i == 0,
                "hops": hops,
                "linked_to": parent,
                "link_similarity": link_sim,
                "snippet": snippet(member_texts[i]) if have[i] else None,
                "jaccard_to_representative": sims[i] if known else None,
                "n_shingles": n_shingles[i] if known else None,
                "hamming_to_representative": distances[i] if known else None,
                "below_threshold": below_threshold(config, method, sims[i], distances[i])
                if known
                else None,
            }
        )
    jac_known = [m["jaccard_to_representative"] for m in members[1:]]
    jac_known = [j for j in jac_known if j is not None]
    cluster_id, size = cluster
    return {
        "cluster_id": cluster_id,
        "size": int(size),
        "members_shown": len(members),
        "members": members,
        "min_jaccard_to_representative": min(jac_known) if jac_known else None,
        "chained_members": sum(1 for m in members[1:] if m["below_threshold"]),
    }


def largest_clusters_section(
    config: dict[str, Any],
    method: str,
    corpus: str | None,
    sizes: dict[Any, int],
    members_of: dict[Any, set[Any]],
    links: Links,
    max_members: int,
    input_format: str | None = None,
    skipped: frozenset[str] = frozenset(),
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(corpus, top_clusters)``: where the texts came from (or why they are missing), and
    the clusters of ``sizes`` (id -> size, largest first), each with at most ``max_members``
    members in breadth-first order along ``links``. ``input_format``: the run's
    ``--input-format``, for a corpus whose file names do not say it; ``skipped``: the input
    files the run skipped whole (:func:`~neardup_spark.io.finished.skipped_paths`)."""
    orders = {cid: bfs_order(cid, members_of[cid], links, max_members) for cid in sizes}
    wanted = [m for order in orders.values() for m, _, _, _ in order]
    texts: dict[Any, str | None] = {}
    problem: str | None = None if corpus else "report.json records no input path"
    if corpus and wanted:
        id_col, text_col = str(config.get("id_col", "id")), str(config.get("text_col", "text"))
        texts, problem = read_texts(corpus, id_col, text_col, wanted, input_format, skipped)
    corpus_info = {
        "path": corpus,
        "available": bool(corpus) and problem is None,
        "problem": problem,
    }
    clusters = [
        cluster_entry(config, method, (cid, size), orders[cid], texts)
        for cid, size in sizes.items()
    ]
    return corpus_info, clusters
