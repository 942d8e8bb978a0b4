"""Reading a finished run's OUTPUT back on the driver, without Spark (PyArrow): its report, the
config it ran with, its Parquet tables. ``neardup report``, ``evaluate`` and ``explain`` read
through here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import pyarrow_filesystem
from neardup_spark.io.output import REPORT_FILE


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


def parquet_dataset(path: str, what: str) -> ds.Dataset:
    """A Parquet file or directory (``_SUCCESS`` and dot files are skipped); a missing or
    unreadable one is a :class:`UserError` naming ``what``."""
    try:
        fs, inner = pyarrow_filesystem(path)
        return ds.dataset(inner, format="parquet", filesystem=fs)
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"cannot read {what} {path} as Parquet: {exc}") from None


def require_columns(schema: pa.Schema, columns: Sequence[str], what: str, path: str) -> None:
    """A :class:`UserError` naming the columns of ``columns`` that ``schema`` lacks."""
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise UserError(
            f"{what} {path} lacks column(s) {', '.join(missing)}; "
            f"columns present: {', '.join(schema.names)}"
        )


def read_table(path: str, what: str, columns: Sequence[str] | None = None) -> pa.Table:
    """A whole Parquet dataset as one table (``columns``: only these, checked first)."""
    dataset = parquet_dataset(path, what)
    if columns is not None:
        require_columns(dataset.schema, columns, what, path)
    try:
        return dataset.to_table(columns=list(columns) if columns is not None else None)
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"cannot read {what} {path} as Parquet: {exc}") from None
