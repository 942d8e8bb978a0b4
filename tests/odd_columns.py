"""One corpus under column names Spark would parse (dots, a backtick, spaces, a comma, brackets,
non-ASCII letters) and under plain ones, for the tests that run a command over each and compare:
names are taken as they are (neardup_spark/stages/names.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from neardup_spark.quality.generate import generate_corpus

# The input's odd names -> their plain twins: id, text, two --prefer keys, a group column and
# columns deduplicated/ carries.
PLAIN = {
    "doc.id": "id",
    "body text": "text",
    "we`ird": "score",
    "note, desc": "note",
    "a[0]": "site",
    "größe": "size",
    "名前": "name",
}
ID, TEXT, SCORE, NOTE, SITE = "doc.id", "body text", "we`ird", "note, desc", "a[0]"
# --prefer in its quoting rule: a name holding a space or a comma, or a backtick (doubled
# inside), in backticks.
PREFER = {"odd": "`we``ird` desc, `note, desc`", "plain": "score desc, note"}
FOOTER = "\nHome | About us | Contact the editorial team\nAll rights reserved by the example group"


def odd_table(docs: int = 60) -> pa.Table:
    """``docs`` documents with planted near-duplicates and exact copies, each ending in a site
    footer (boilerplate), under the odd names."""
    corpus, _ = generate_corpus(docs, seed=5, mean_words=60)
    texts = corpus.column("text").to_pylist()
    texts[1] = texts[0]  # an exact copy
    n = corpus.num_rows
    return pa.table(
        {
            ID: corpus.column("id"),
            TEXT: pa.array([text + FOOTER for text in texts]),
            SCORE: pa.array([(i * 37) % 11 for i in range(n)], pa.int64()),
            NOTE: pa.array([f"n{i % 4}" for i in range(n)]),
            SITE: pa.array([f"site{i % 3}.example" for i in range(n)]),
            "größe": pa.array([float(i) / 3 for i in range(n)]),
            "名前": pa.array([f"名{i}" for i in range(n)]),
        }
    )


def plain(table: pa.Table) -> pa.Table:
    """``table`` with each odd name replaced by its plain twin (other names kept)."""
    return table.rename_columns([PLAIN.get(name, name) for name in table.column_names])


def write_corpus(table: pa.Table, root: Path, fmt: str = "parquet", files: int = 2) -> Path:
    """``table`` as ``files`` Parquet or JSON lines files in a new directory ``root``."""
    root.mkdir(parents=True)
    step = -(-table.num_rows // files)
    for i in range(files):
        part = table.slice(i * step, step)
        if fmt == "parquet":
            pq.write_table(part, root / f"part-{i}.parquet")
        else:
            with open(root / f"part-{i}.jsonl", "w", encoding="utf-8") as out:
                for row in part.to_pylist():
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return root


def rows(path: Path) -> pa.Table:
    """A Parquet output's rows under plain names (in name order: Spark reads JSON's columns
    so), sorted, without nullability flags."""
    table = plain(ds.dataset(str(path)).to_table())
    table = table.select(sorted(table.column_names))
    schema = pa.schema([field.with_nullable(True) for field in table.schema])
    return table.cast(schema).sort_by([(name, "ascending") for name in table.column_names])
