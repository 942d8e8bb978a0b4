"""A decontamination run's reference: benchmark items read on the driver with PyArrow.

A reference is one or more paths (files, directories, globs) of Parquet or JSON lines files
(compressed ``.gz`` and the like as their names say). Each file is one benchmark, named by its
file name in the report. An item is one row: its id (any type, kept as a string) and its text,
the given fields (every string column but the id when none are given) joined by one space,
null fields left out. Reference sets are small (10^3-10^5 items): they are read whole here,
never by Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from neardup_spark.errors import UserError
from neardup_spark.io.corpus import list_data_files
from neardup_spark.io.filesystem import basename
from neardup_spark.io.format_names import format_of
from neardup_spark.io.paths import is_local_path, local_path


@dataclass(frozen=True)
class ReferenceItems:
    """The items of a reference, in file order: ``ids`` and ``texts`` (strings) and the
    ``benchmarks`` (file names) they come from; ``files``: every file read."""

    ids: pa.Array
    texts: pa.Array
    benchmarks: pa.Array
    files: tuple[str, ...]


def reference_files(paths: list[str]) -> list[str]:
    """The data files under the reference ``paths`` (a missing one is a :class:`UserError`)."""
    files: list[str] = []
    for path in paths:
        try:
            found, _ = list_data_files(None, path)
        except UserError as exc:
            raise UserError(f"--reference: {exc}") from None
        if not found:
            raise UserError(f"--reference: no data files found under {path}")
        files += [f for f in found if f not in files]
    return files


def read_reference_file(path: str) -> pa.Table:
    """One reference file, Parquet or JSON lines (a compressed one as its name says)."""
    fmt = format_of(path)
    source = local_path(path) if is_local_path(path) else path
    try:
        if fmt == "parquet":
            return pq.read_table(source)
        if fmt == "json":
            with pa.input_stream(source, compression="detect") as stream:
                return pajson.read_json(stream)
    except pa.ArrowInvalid as exc:
        if "Empty JSON file" in str(exc):
            return pa.table({})
        raise UserError(f"cannot read reference file {path}: {exc}") from None
    except OSError as exc:
        raise UserError(f"cannot read reference file {path}: {exc}") from None
    raise UserError(
        f"reference file {path}: not Parquet or JSON lines by its name (.parquet, .jsonl, "
        ".json, .ndjson, possibly compressed: .gz)"
    )


def item_texts(table: pa.Table, path: str, id_col: str, fields: tuple[str, ...]) -> pa.Table:
    """``id`` and ``text`` of one reference file's items; missing columns, a field that is not
    a string, an item without text are :class:`UserError`\\ s."""
    present = ", ".join(table.column_names)
    if id_col not in table.column_names:
        raise UserError(
            f"reference file {path} has no id column {id_col!r} (columns: {present}); "
            "choose it with --reference-id-col"
        )
    strings = [
        f.name
        for f in table.schema
        if f.name != id_col and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
    ]
    chosen = list(fields) or strings
    for name in chosen:
        if name not in table.column_names:
            raise UserError(
                f"reference file {path} has no field {name!r} (columns: {present}); "
                "choose the text fields with --reference-fields a,b"
            )
        if name not in strings:
            raise UserError(f"reference field {name!r} of {path} is not a string column")
    if not chosen:
        raise UserError(f"reference file {path} has no string column besides the id {id_col!r}")
    columns = [table.column(name).cast(pa.large_string()).combine_chunks() for name in chosen]
    separator = pa.scalar(" ", pa.large_string())
    # A null field reads as empty (null_handling="skip" loses rows of a single column's nulls
    # in this PyArrow); the spaces around it do not change the item's words.
    texts = pc.binary_join_element_wise(
        *columns, separator, null_handling="replace", null_replacement=""
    )
    ids = table.column(id_col).cast(pa.string())
    if ids.null_count:
        raise UserError(f"reference file {path}: {ids.null_count} items have a null id")
    return pa.table({"id": ids, "text": texts})


def read_reference(
    paths: list[str], id_col: str = "id", fields: tuple[str, ...] = ()
) -> ReferenceItems:
    """Every item of the reference ``paths``; an empty reference, a missing id or field
    column, a repeated id within a file are :class:`UserError`\\ s."""
    files = reference_files(paths)
    tables: list[pa.Table] = []
    names: list[pa.Array] = []
    for path in files:
        raw = read_reference_file(path)
        if raw.num_rows == 0:  # no items: no columns to check
            continue
        table = item_texts(raw, path, id_col, fields)
        counts = pc.value_counts(table.column("id").combine_chunks())
        repeated = counts.filter(pc.greater(counts.field("counts"), 1))
        if len(repeated):
            raise UserError(
                f"reference file {path}: item id {repeated[0]['values'].as_py()!r} is repeated; "
                "ids must be unique within a file"
            )
        tables.append(table)
        names.append(pa.array([basename(path)] * table.num_rows, pa.string()))
    items = pa.concat_tables(tables) if tables else None
    if items is None or items.num_rows == 0:
        raise UserError(f"the reference ({', '.join(paths)}) holds no items")
    return ReferenceItems(
        ids=items.column("id").combine_chunks(),
        texts=items.column("text").combine_chunks(),
        benchmarks=pa.concat_arrays(names),
        files=tuple(files),
    )
