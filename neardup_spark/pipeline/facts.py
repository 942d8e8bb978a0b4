"""What a run knows before it decides where its steps execute: the input's files and their
footers, read once (:func:`gather_facts`), and the session's kind, master and cores.

The plan (:mod:`.plan`) decides from these facts alone, so no step lists the input or opens a
footer again to ask whether it may read the input in this process: each local Parquet file's
footer is read once per run (the read that checks the files' schemas,
:func:`neardup_spark.io.schemas.read_footers`), and what the plan and the steps need of it is kept
here as plain values (rows, the id and text columns' types and bytes per row group, the schema).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark.io.corpus import ListedInput
from neardup_spark.io.filesystem import is_local
from neardup_spark.io.paths import local_path
from neardup_spark.runtime.engine import CLASSIC, default_parallelism, engine_of, local_cores

_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
# Id types whose order Arrow and Spark agree on (a component's and a group's smallest id).
_ORDERED_ID_TYPES = (T.StringType, T.LongType, T.IntegerType, T.ShortType, T.ByteType)
# Spark's spark.sql.parquet.compression.codec -> PyArrow's compression, for the codecs both
# write as the same Parquet codec.
PARQUET_CODECS = {
    "snappy": "snappy",
    "gzip": "gzip",
    "zstd": "zstd",
    "uncompressed": "none",
    "none": "none",
}
_WIDE_TYPES = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}

_STRING_TYPES = {pa.string(): pa.string(), pa.large_string(): pa.string()}
TEXT_TYPES = {**_STRING_TYPES, pa.binary(): pa.binary(), pa.large_binary(): pa.binary()}


@dataclass(frozen=True)
class ParquetFileFacts:
    """One local Parquet input file, from its footer: its local path, its Arrow schema and,
    for each row group, its rows and the id and text columns' uncompressed bytes."""

    path: str
    schema: pa.Schema
    row_group_rows: tuple[int, ...]
    row_group_bytes: tuple[int, ...]

    @property
    def rows(self) -> int:
        return sum(self.row_group_rows)

    def column_type(self, name: str) -> pa.DataType | None:
        index = self.schema.get_field_index(name)
        return None if index < 0 else self.schema.field(index).type

    @classmethod
    def of(cls, path: str, metadata: pq.FileMetaData, columns: tuple[str, str]) -> ParquetFileFacts:
        """The facts of the file at ``path`` (a local path) with footer ``metadata``."""
        groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]
        return cls(
            path,
            metadata.schema.to_arrow_schema(),
            tuple(g.num_rows for g in groups),
            tuple(columns_bytes(g, columns) for g in groups),
        )


def columns_bytes(row_group: pq.RowGroupMetaData, columns: tuple[str, ...]) -> int:
    """The uncompressed bytes of ``columns`` in ``row_group``."""
    chunks = (row_group.column(i) for i in range(row_group.num_columns))
    return sum(c.total_uncompressed_size for c in chunks if c.path_in_schema in columns)


@dataclass(frozen=True)
class InputFacts:
    """The input as listed once: a catalog table (no files), or data files in a format."""

    shown: str
    files: tuple[str, ...] = ()
    format: str | None = None
    table: bool = False
    # Every file on this machine's file system.
    local_files: bool = False
    # Files left out by --skip-corrupt.
    skipped: int = 0
    # Local Parquet inputs: each file's footer facts, in the listing's order (else empty).
    parquet: tuple[ParquetFileFacts, ...] = ()
    # Why the input's rows cannot be copied into deduplicated/ by PyArrow with the types Spark
    # would write back (None: they can; see :func:`copy_problem`).
    copy_problem: str | None = "not read yet"
    # The id and text columns (as the run names them) and the Spark type of the id column.
    columns: tuple[str, str] = ("id", "text")
    id_type_ordered: bool = True  # one Arrow and Spark order alike (strings, integers)

    @property
    def rows(self) -> int | None:
        """Rows of a local Parquet input, by its footers (None: not known before reading)."""
        return sum(f.rows for f in self.parquet) if self.parquet else None

    @property
    def id_text_bytes(self) -> int | None:
        """The id and text columns' uncompressed bytes of a local Parquet input."""
        return sum(sum(f.row_group_bytes) for f in self.parquet) if self.parquet else None

    def row_group_problem(self) -> str | None:
        """Why this process or a task may not read the input's row groups itself: a file
        lacking the id or text column at its top level, an id that is neither an integer nor a
        string, a text neither a string nor binary, texts of two kinds; None when it may."""
        if not self.parquet:
            return "not local Parquet files"
        text_kinds = set()
        for facts in self.parquet:
            id_type, text_type = (facts.column_type(name) for name in self.columns)
            if id_type is None or text_type is None:
                return f"{facts.path} lacks the id or text column at its top level"
            if not (pa.types.is_integer(id_type) or id_type in _STRING_TYPES):
                return f"an id column of type {id_type}"
            if text_type not in TEXT_TYPES:
                return f"a text column of type {text_type}"
            text_kinds.add(TEXT_TYPES[text_type])
        if len(text_kinds) != 1:
            return "text columns of both string and binary types"
        if not self.rows:
            return "no rows"
        return None


@dataclass(frozen=True)
class EngineFacts:
    """The session: classic or Spark Connect, its master, its cores, and the threads this
    process may use for work its tasks would do (0: the tasks run on other machines)."""

    kind: str = "classic"
    master: str = "local[2]"
    cores: int = 2
    local_threads: int = 2
    parquet_codec: str = "snappy"


@dataclass(frozen=True)
class RunFacts:
    """Everything the plan decides from, gathered once per run."""

    input: InputFacts
    engine: EngineFacts = field(default_factory=EngineFacts)
    # OUTPUT is on this machine's file system (None: no OUTPUT, the Python API).
    output_local: bool | None = None
    # The run cleans its texts first (--strip-boilerplate): its pass is the cleaning one.
    cleaning: bool = False


def parquet_facts(listed: ListedInput, columns: tuple[str, str]) -> tuple[ParquetFileFacts, ...]:
    """The facts of a listed Parquet input's files from their footers (read once, with the
    listing); empty unless every file is a local Parquet file whose footer was read."""
    metadata = [footer.metadata for footer in listed.footers]
    if listed.format != "parquet" or not metadata or None in metadata:
        return ()
    return tuple(
        ParquetFileFacts.of(local_path(footer.path), footer.metadata, columns)
        for footer in listed.footers
        if footer.metadata is not None
    )


def in_process_threads(spark: SparkSession) -> int:
    """Threads for in-process work: the local master's cores; 0 when the session's tasks do
    not run on this machine (a cluster's, or a remote Spark Connect server's). A Connect server
    in local mode reached at a loopback address runs its tasks on this machine's cores, on the
    files this process sees: its client does that work as a classic driver would."""
    engine = engine_of(spark)
    master = engine.master()
    if not master.startswith("local"):
        return 0
    if engine.kind == CLASSIC:
        return max(1, engine.default_parallelism())
    return local_cores(master) if connect_host(spark) in _LOOPBACK else 0


def connect_host(spark: SparkSession) -> str | None:
    """The host a Spark Connect session's client talks to (None when it cannot be told)."""
    try:  # the client's host (PySpark 3.5 to 4.x); a custom channel builder may not tell it
        host = getattr(spark, "client").host  # noqa: B009 (not on the classic type)
    except Exception:  # any failure means: not known
        return None
    return str(host).strip("[]").lower() if host else None


def engine_facts(spark: SparkSession) -> EngineFacts:
    """The session's kind, master, cores and in-process threads."""
    engine = engine_of(spark)
    codec = str(spark.conf.get("spark.sql.parquet.compression.codec", "snappy")).lower()
    return EngineFacts(
        engine.kind,
        engine.master(),
        default_parallelism(spark),
        in_process_threads(spark),
        codec,
    )


def id_type_ordered(id_type: T.DataType) -> bool:
    """Arrow and Spark order ids of ``id_type`` alike (a group's and a component's smallest id
    is the same on either path)."""
    return isinstance(id_type, _ORDERED_ID_TYPES) and type(id_type) is not T.VarcharType


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` as Spark writes it: every field nullable, wide strings and binaries narrow,
    no metadata."""
    return pa.schema([pa.field(f.name, _WIDE_TYPES.get(f.type, f.type), True) for f in schema])


def copied_type(data_type: pa.DataType) -> bool:
    """A type Spark reads from Parquet and writes back as the same Parquet type."""
    return (
        pa.types.is_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_boolean(data_type)
        or pa.types.is_signed_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_date32(data_type)
    )


def copy_problem(
    schema: T.StructType, parquet: tuple[ParquetFileFacts, ...], engine: EngineFacts
) -> str | None:
    """Why ``deduplicated/`` cannot be copied from the input files by PyArrow as Spark would
    write it (``schema``: the session's schema of the input): no local Parquet files, no
    threads here, a codec PyArrow does not write alike, a column type Spark would change, or
    the session's schema not the files' own (a partition column, a column a file lacks)."""
    if not parquet:
        return "not local Parquet files"
    if not engine.local_threads:
        return "tasks run on other machines"
    if engine.parquet_codec not in PARQUET_CODECS:
        return f"Parquet codec {engine.parquet_codec}"
    try:
        expected = plain_schema(to_arrow_schema(schema))
    except (TypeError, NotImplementedError):  # a type Arrow has no twin for
        return "a column type Arrow cannot hold"
    changed = [f.name for f in expected if not copied_type(f.type)]
    if changed:
        return f"column {changed[0]!r} of a type Spark would write otherwise"
    if any(not plain_schema(f.schema).equals(expected) for f in parquet):
        return "the files' schemas are not the input's (a partition or missing column)"
    return None


def gather_facts(
    spark: SparkSession,
    listed: ListedInput,
    columns: tuple[str, str],
    schema: T.StructType | None = None,
    skipped: int = 0,
    output: str | None = None,
    cleaning: bool = False,
) -> RunFacts:
    """A run's facts from its listing (:func:`~neardup_spark.io.corpus.list_input`: the files
    and footers, read once), the session, the input's Spark ``schema`` once read (None: not
    yet, a preview), the files it skipped, its OUTPUT and whether it cleans its texts first."""
    engine = engine_facts(spark)
    parquet = parquet_facts(listed, columns)
    id_type = schema[columns[0]].dataType if schema is not None else T.StringType()
    source = InputFacts(
        listed.source.shown,
        tuple(listed.files),
        listed.format,
        table=listed.source.table is not None,
        local_files=bool(listed.files) and all(is_local(f) for f in listed.files),
        skipped=skipped,
        parquet=parquet,
        copy_problem=copy_problem(schema, parquet, engine) if schema is not None else "not read",
        columns=columns,
        id_type_ordered=id_type_ordered(id_type),
    )
    return RunFacts(source, engine, None if output is None else is_local(output), cleaning)


def frame_facts(spark: SparkSession, id_type: T.DataType, cleaning: bool) -> RunFacts:
    """The facts of a run over a DataFrame given to the Python API: its files are not known
    to be read as they are (the DataFrame may be any query), so every step that reads the
    input runs in Spark."""
    source = InputFacts("a DataFrame", table=True, id_type_ordered=id_type_ordered(id_type))
    return RunFacts(source, engine_facts(spark), None, cleaning)
