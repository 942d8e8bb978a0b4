"""Reading a finished run's OUTPUT back on the driver, without Spark (PyArrow): its report, the
config it ran with, its Parquet tables, and its input corpus (in any input format).
``neardup report``, ``evaluate`` and ``explain`` read through here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds

from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import comparable_path, list_data_files
from neardup_spark.io.filesystem import pyarrow_filesystem
from neardup_spark.io.format_names import FORMAT_NAMES, format_of
from neardup_spark.io.globs import has_glob
from neardup_spark.io.output import REPORT_FILE
from neardup_spark.io.schemas import read_footers
from neardup_spark.io.whole_files import check_files_here, footer_check, refuse_or_skip


def child(path: str, name: str) -> str:
    """``path/name`` for paths and URIs alike."""
    return path.rstrip("/") + "/" + name


def read_run_report(output: str) -> dict[str, Any]:
    """``OUTPUT/report.json`` as a dict; a missing or unreadable file is a :class:`UserError`."""
    path = child(output, REPORT_FILE)
    try:
        fs, inner = pyarrow_filesystem(path)
        with fs.open_input_stream(inner) as stream:
            data = json.loads(stream.read().decode("utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"{path} not found: is {output} the OUTPUT of a finished `neardup dedupe` run?"
        ) from None
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object")
    return data


def config_of_report(report: dict[str, Any]) -> DedupeConfig:
    """The dedupe config a run recorded in its report (``config``); settings this version does
    not know are ignored, missing ones take their defaults."""
    return DedupeConfig.from_dict(dict(report.get("config") or {}))


def config_of_run(output: str) -> DedupeConfig:
    """The dedupe config of the finished run at ``output``."""
    return config_of_report(read_run_report(output))


def dataset_of(
    path: str, what: str, fmt: str = "parquet", files: list[str] | None = None
) -> ds.Dataset:
    """A file or directory of ``fmt`` (``_SUCCESS`` and dot files are skipped), or the ``files``
    a glob ``path`` matched; a missing or unreadable one is a :class:`UserError` naming
    ``what``. CSV is read as ``neardup dedupe``'s Spark reader reads it where it matters to a
    text: a header row, quoted values holding line breaks, empty fields as nulls; compressed
    text files by their suffix."""
    file_format: Any = fmt
    if fmt == "csv":
        file_format = ds.CsvFileFormat(
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            # As dedupe's Spark reader: an empty field is null, quoted ("") or not, and no
            # other text ("NA", "null") is taken for a null.
            convert_options=pacsv.ConvertOptions(null_values=[""], strings_can_be_null=True),
        )
    try:
        if files:
            fs = pyarrow_filesystem(files[0])[0]
            listed = [pyarrow_filesystem(file)[1] for file in files]
            return ds.dataset(listed, format=file_format, filesystem=fs)
        fs, inner = pyarrow_filesystem(path)
        return ds.dataset(inner, format=file_format, filesystem=fs)
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"cannot read {what} {path} as {FORMAT_NAMES[fmt]}: {exc}") from None


def parquet_dataset(path: str, what: str) -> ds.Dataset:
    """A Parquet file or directory (:func:`dataset_of`)."""
    return dataset_of(path, what)


def skipped_paths(report: dict[str, Any]) -> frozenset[str]:
    """The input files a finished run skipped whole (``report.json``'s ``skipped_files``; not
    its malformed records, counted by directory), to leave out when its corpus is read again."""
    entries = report.get("skipped_files") or []
    return frozenset(comparable_path(e["path"]) for e in entries if "records" not in e)


def whole_files(
    files: list[str], fmt: str, path: str, skipped: frozenset[str] = frozenset()
) -> list[str]:
    """``files`` less those in ``skipped`` (:func:`skipped_paths`), each checked as ``neardup
    dedupe`` checks it (:mod:`~neardup_spark.io.whole_files`, here): one that cannot be read
    whole is a :class:`UserError` with the run's message."""
    kept = [f for f in files if comparable_path(f) not in skipped]
    if fmt in ("parquet", "orc"):
        checks = [footer_check(footer, fmt) for footer in read_footers(kept, fmt)]
    else:
        checks = check_files_here(kept, fmt)
    refuse_or_skip(checks, path, fmt, skip_corrupt=False)
    return kept


def corpus_dataset(
    path: str,
    what: str = "corpus",
    fmt: str | None = None,
    fallback: str | None = None,
    skipped: frozenset[str] = frozenset(),
) -> ds.Dataset:
    """An input corpus (a file, a directory or, as for ``neardup dedupe``, a glob) in ``fmt``,
    else in the format its files' names say, else ``fallback`` (the ``--input-format`` a run
    was given, say), else Parquet. Its files are read whole or not at all, as the run read them
    (:func:`whole_files`; ``skipped``: those the run skipped)."""
    try:
        files = list_data_files(None, path)[0]  # as dedupe lists them: no _* or .* names
    except UserError as exc:  # named as the caller names the corpus
        missing = str(exc).removeprefix("input not found: ")
        if missing == str(exc):
            raise
        raise UserError(f"{what} not found: {missing}") from None
    fmt = fmt or next(filter(None, map(format_of, files)), None) or fallback or "parquet"
    kept = whole_files(files, fmt, path, skipped)
    if not kept:
        raise UserError(f"every file of the {what} {path} was skipped by the run")
    return dataset_of(path, what, fmt, kept if has_glob(path) or len(kept) < len(files) else None)


def require_columns(schema: pa.Schema, columns: Sequence[str], what: str, path: str) -> None:
    """A :class:`UserError` naming the columns of ``columns`` that ``schema`` lacks."""
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise UserError(
            f"{what} {path} lacks column(s) {', '.join(missing)}; "
            f"columns present: {', '.join(schema.names)}"
        )


def read_table(
    path: str,
    what: str,
    columns: Sequence[str] | None = None,
    corpus: bool = False,
    fallback: str | None = None,
    skipped: frozenset[str] = frozenset(),
) -> pa.Table:
    """A whole dataset as one table (``columns``: only these, checked first): Parquet, or with
    ``corpus`` an input corpus in any input format (:func:`corpus_dataset`; ``skipped``: the
    files its run skipped)."""
    if corpus:
        dataset = corpus_dataset(path, what, None, fallback, skipped)
    else:
        dataset = parquet_dataset(path, what)
    if columns is not None:
        require_columns(dataset.schema, columns, what, path)
    try:
        return dataset.to_table(columns=list(columns) if columns is not None else None)
    except (pa.ArrowInvalid, OSError) as exc:
        shown = FORMAT_NAMES[dataset.format.default_extname]
        raise UserError(f"cannot read {what} {path} as {shown}: {exc}") from None
