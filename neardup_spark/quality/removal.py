"""Why a finished run removed a document, or kept it: its row of the run's ``clusters/`` read
with PyArrow (a dataset filter on ``doc_id``; no Spark).

:func:`removal` gives the document's kept document (``cluster_id``), the ``similarity`` the run
recorded between them (``clusters/``' column under the anchored rule: the exact Jaccard of a
MinHash run), its cluster's size and the run's cluster rule; ``neardup explain INPUT ID
--output OUTPUT`` then explains the pair (the document, its kept one) from the texts as
:func:`neardup_spark.quality.explain.explain` does, their Jaccard computed again.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from neardup_spark.columns import CLUSTER_ID, DOC_ID, IS_REPRESENTATIVE, SIMILARITY
from neardup_spark.errors import UserError
from neardup_spark.io.finished import child, parquet_dataset, read_run_report, require_columns
from neardup_spark.quality.explain import typed_id


def removal(output: str, doc_id: Any) -> dict[str, Any]:
    """Document ``doc_id`` (cast to the run's id type) in the run at ``output``: ``doc_id``,
    ``cluster_id`` (its kept document), ``removed``, ``similarity`` (to the kept document, as
    ``clusters/`` records it; None where it records none: the components rule), ``cluster_size``
    (the run's documents whose ``cluster_id`` is this one's, itself included: the kept row's
    ``duplicates`` + 1), ``cluster_rule`` and ``output``. An id the run does not hold is a
    :class:`UserError`."""
    report = read_run_report(output)
    path = child(output, "clusters")
    dataset = parquet_dataset(path, "clusters table")
    require_columns(dataset.schema, (DOC_ID, CLUSTER_ID, IS_REPRESENTATIVE), "clusters table", path)
    id_type = dataset.schema.field(DOC_ID).type
    key = typed_id(doc_id, id_type, DOC_ID)
    columns = [DOC_ID, CLUSTER_ID, IS_REPRESENTATIVE]
    has_similarity = SIMILARITY in dataset.schema.names
    rows = dataset.to_table(
        columns=columns + ([SIMILARITY] if has_similarity else []),
        filter=ds.field(DOC_ID) == pa.scalar(key, id_type),
    ).to_pylist()
    if not rows:
        raise UserError(f"document {key!r} is not in {path}: is it an id of that run's input?")
    row = rows[0]
    size = dataset.count_rows(filter=ds.field(CLUSTER_ID) == pa.scalar(row[CLUSTER_ID], id_type))
    config = report.get("config") or {}
    return {
        "output": output,
        "doc_id": row[DOC_ID],
        "cluster_id": row[CLUSTER_ID],
        "removed": not row[IS_REPRESENTATIVE],
        "similarity": row.get(SIMILARITY) if not row[IS_REPRESENTATIVE] else None,
        "cluster_size": int(size),
        "cluster_rule": report.get("cluster_rule", config.get("cluster_rule", "components")),
        "measure": config.get("similarity", "jaccard")
        if config.get("method") == "minhash"
        else None,
    }


def format_removal(r: dict[str, Any]) -> str:
    """A readable account of :func:`removal`'s result."""
    if not r["removed"]:
        return (
            f"kept      {r['doc_id']!r} in {r['output']}: its cluster's kept document, standing "
            f"for {r['cluster_size'] - 1:,} removed document(s) ({r['cluster_rule']} rule)\n"
        )
    measure = f" ({r['measure']})" if r.get("measure") else ""
    recorded = (
        f"similarity{measure} {r['similarity']:.4f} as clusters/ records it"
        if r["similarity"] is not None
        else "no similarity recorded: it went with its connected component, not necessarily "
        "near its kept document"
    )
    return (
        f"removed   {r['doc_id']!r} in {r['output']}: its kept document is "
        f"{r['cluster_id']!r} ({r['cluster_rule']} rule; {recorded}; "
        f"{r['cluster_size']:,} documents in the cluster)\n"
    )
