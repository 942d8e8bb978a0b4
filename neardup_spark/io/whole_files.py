"""A file is read whole or not at all: each input file is checked to its end before Spark reads it.

Spark reads compressed text (JSON lines, CSV) through Hadoop's codecs. Without
``ignoreCorruptFiles`` a gzip file cut short fails the job (a Java stack trace naming a Py4J
call); with it, the rows before the cut are kept without a word; a bzip2 file cut in its last
bytes is read without an error at all. A plain text file cut short is read up to the cut. So
Spark's readers are always given ``ignoreCorruptFiles=false`` (whatever the session sets), and
before they read, every text file is checked here:

* a compressed file (gzip, bzip2, zstd, deflate: the codec its name says) is decompressed to its
  end by PyArrow's (or zlib's) C code: a stream that ends before its end-of-stream marker (an
  empty file included) was cut short; one that does not decode is damaged. Both are named with
  the byte where decoding stopped and the whole lines read before it;
* a JSON lines file whose last line has no line break and is not a JSON object was cut mid-line
  (an object cannot be cut and still be one: an unterminated last line that parses is whole);
* a CSV file must end with a line break (a record cut short may still parse, so a last record
  without one is taken as cut short) and hold an even number of ``"``: one cut inside a quoted
  text does not (a stray quote in an unquoted field is taken for one too).

Plain JSON lines files are checked by their last bytes only; compressed files and CSV files are
read to their end once more, a few hundred MB/s a core (docs/input.md): local files by threads of
this process, other files by Spark tasks that open them with PyArrow's file systems. A file that
cannot be opened there is left to Spark's reader (and logged). Parquet and ORC files are checked
by their footers (:mod:`.schemas`): a file cut short has lost it.
"""

from __future__ import annotations

import bz2
import json
import logging
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import pyarrow_filesystem
from neardup_spark.io.format_names import FORMAT_NAMES
from neardup_spark.io.paths import is_local_path, local_path
from neardup_spark.io.schemas import Footer
from neardup_spark.runtime.engine import default_parallelism

log = logging.getLogger(__name__)

# The codec Spark (Hadoop) reads a file with, by its name's ending, as checked here.
CODECS = {
    ".gz": "gzip",
    ".gzip": "gzip",
    ".bz2": "bz2",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".deflate": "deflate",
}
CHUNK_BYTES = 1 << 20  # decompressed bytes a step at most
IN_BYTES = 1 << 18  # compressed bytes read a step (damage is placed to within them)
GZIP_WBITS = 31  # zlib's window bits for a gzip header and trailer
TAIL_BYTES = 1 << 16
# Reasons a file is refused or skipped, as report.json's skipped_files gives them.
TRUNCATED = "truncated"
DAMAGED = "damaged"
UNREADABLE_FOOTER = "unreadable footer"
# Files named one per warning line at most (then one line for the rest); in an error, at most.
MAX_WARNINGS = 20
MAX_FILES_IN_MESSAGE = 5


@dataclass(frozen=True)
class FileCheck:
    """One file checked to its end: ``reason`` None when whole, else why not (``TRUNCATED``,
    ``DAMAGED``, ...) and ``where`` (what was found, and where reading stopped);
    ``unchecked``: why it could not be checked here (left to Spark's reader)."""

    path: str
    reason: str | None = None
    where: str = ""
    stopped_at_byte: int | None = None
    lines_read: int | None = None
    unchecked: str | None = None


def codec_of(name: str) -> str | None:
    """The codec a file's name says, among those checked here.

    >>> codec_of("shard.jsonl.GZ"), codec_of("x.csv.bz2"), codec_of("x.jsonl")
    ('gzip', 'bz2', None)
    """
    lower = name.lower()
    return next((codec for end, codec in CODECS.items() if lower.endswith(end)), None)


def is_json_object(line: bytes) -> bool:
    """Whether ``line`` holds one whole JSON object (as a JSON lines reader takes a record).

    >>> is_json_object(b'{"id": 1, "text": "a"}'), is_json_object(b'{"id": 1, "te')
    (True, False)
    """
    try:
        return isinstance(json.loads(line.decode("utf-8", errors="replace")), dict)
    except (ValueError, RecursionError):
        return False


class TruncatedStream(OSError):
    """A compressed stream whose input ended before its end-of-stream marker."""


def _zlib_chunks(raw: Any, new: Callable[[], Any]) -> Iterator[bytes]:
    """gzip (members one after another) or zlib streams decompressed, in order."""
    inflate, pending = new(), raw.read(IN_BYTES)
    while pending:
        out = inflate.decompress(pending, CHUNK_BYTES)
        if out:
            yield out
        if inflate.eof:
            pending = inflate.unused_data or raw.read(IN_BYTES)
            inflate = new() if pending else inflate
            continue
        pending = inflate.unconsumed_tail or raw.read(IN_BYTES)
    rest = inflate.flush()
    if rest:
        yield rest
    if not inflate.eof:
        raise TruncatedStream("Truncated compressed stream")


def _bz2_chunks(raw: Any) -> Iterator[bytes]:
    """bzip2 streams (one after another, as pbzip2 writes them) decompressed, in order."""
    unpack, data = bz2.BZ2Decompressor(), b""
    while True:
        if unpack.eof:
            data = unpack.unused_data or raw.read(IN_BYTES)
            if not data:
                return
            unpack = bz2.BZ2Decompressor()
        elif unpack.needs_input:
            data = raw.read(IN_BYTES)
            if not data:
                raise TruncatedStream("Truncated compressed stream")
        else:
            data = b""
        out = unpack.decompress(data, CHUNK_BYTES)
        if out:
            yield out


def decompressed(raw: Any, codec: str | None) -> Iterator[bytes]:
    """``raw``'s bytes in chunks, decompressed by ``codec``: the standard library's zlib and
    bz2 (they hand out all they decoded before a cut), PyArrow's zstd (whose reads lose up to
    :data:`IN_BYTES` of output before one). A stream cut short raises an ``OSError`` whose
    message says "Truncated"; a damaged one, the codec's error."""
    if codec is None:
        return iter(lambda: raw.read(CHUNK_BYTES), b"")
    if codec == "gzip":
        return _zlib_chunks(raw, lambda: zlib.decompressobj(GZIP_WBITS))
    if codec == "deflate":
        return _zlib_chunks(raw, zlib.decompressobj)
    if codec == "bz2":
        return _bz2_chunks(raw)
    stream = pa.CompressedInputStream(raw, codec)
    return iter(lambda: stream.read(IN_BYTES), b"")


@dataclass
class _TextScan:
    """What a text file's bytes tell, fed in order: lines, quote characters, its last line."""

    count_quotes: bool = False
    lines: int = 0
    quotes: int = 0
    size: int = 0
    last_line: bytes = b""

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self.lines += chunk.count(b"\n")
        self.quotes += chunk.count(b'"') if self.count_quotes else 0
        cut = chunk.rfind(b"\n")
        self.last_line = chunk[cut + 1 :] if cut >= 0 else self.last_line + chunk

    def problem(self, fmt: str) -> str | None:
        """Why the text, read to its end, is not whole (None when it is)."""
        line = self.last_line.rstrip(b"\r")
        if fmt == "json" and line.strip() and not is_json_object(line):
            return (
                f"its last line (line {self.lines + 1:,}) has no line break and is not a JSON "
                "object: the file was cut mid-line"
            )
        if fmt == "csv" and self.last_line and not self.last_line.endswith(b"\r"):
            return (
                f"it ends inside line {self.lines + 1:,}, without a line break: cut short (a "
                "CSV file's last record ends with one; add it if the file is whole)"
            )
        if fmt == "csv" and self.quotes % 2:
            return (
                f"it ends inside a quoted value ({self.quotes:,} quote characters, an odd "
                "number): cut short, or a stray quote in an unquoted field"
            )
        return None


def check_stream(path: str, raw: Any, size: int, codec: str | None, fmt: str) -> FileCheck:
    """Read ``raw`` (the file's bytes, ``size`` of them) to its end, decompressed by ``codec``;
    what the text read tells (:class:`_TextScan`) for ``fmt``."""
    scan = _TextScan(count_quotes=fmt == "csv")
    if codec is not None and size == 0:
        where = f"the file is empty (0 bytes), without even a {codec} header: cut short"
        return FileCheck(path, TRUNCATED, where, 0, 0)
    try:
        for chunk in decompressed(raw, codec):
            scan.feed(chunk)
    except (OSError, zlib.error, pa.ArrowException) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        at = raw.tell()
        if "runcated" in message:
            where = (
                f"the {codec} stream stops at byte {size:,}, the end of the file, before its "
                f"end-of-stream marker: cut short after {scan.lines:,} whole line(s)"
            )
            return FileCheck(path, TRUNCATED, where, size, scan.lines)
        where = (
            f"the {codec} data is damaged before byte {at:,} of {size:,} ({message}), after "
            f"{scan.lines:,} whole line(s)"
        )
        return FileCheck(path, DAMAGED, where, at, scan.lines)
    problem = scan.problem(fmt)
    if problem is not None:
        return FileCheck(path, TRUNCATED, problem, size, scan.lines)
    return FileCheck(path, lines_read=scan.lines)


def check_json_tail(path: str, raw: Any, size: int) -> FileCheck:
    """A plain JSON lines file by its last bytes: whole unless its last line has no line break
    and is not a JSON object (:func:`is_json_object`)."""
    span, tail = TAIL_BYTES, b""
    while True:
        start = max(0, size - span)
        raw.seek(start)
        tail = raw.read(size - start)
        cut = tail.rfind(b"\n")
        if cut >= 0 or start == 0:
            break
        span *= 4
    line = tail[cut + 1 :]
    if not line.strip() or is_json_object(line):
        return FileCheck(path)
    begins = start + cut + 1
    where = (
        f"its last line (from byte {begins:,} to the end of the file at byte {size:,}) has no "
        "line break and is not a JSON object: the file was cut mid-line"
    )
    return FileCheck(path, TRUNCATED, where, size)


def check_file(path: str, fmt: str) -> FileCheck:
    """:class:`FileCheck` of one text file of ``fmt`` (``json``, ``csv``), opened by PyArrow's
    file systems (a file it cannot open is ``unchecked``)."""
    codec = codec_of(path)
    try:
        fs, inner = pyarrow_filesystem(path)
        size = fs.get_file_info(inner).size
        raw = fs.open_input_file(inner)
    except (OSError, pa.ArrowException, ValueError) as exc:
        return FileCheck(path, unchecked=f"{type(exc).__name__}: {exc}".splitlines()[0])
    with raw:
        if codec is None and fmt == "json":
            return check_json_tail(path, raw, size)
        return check_stream(path, raw, size, codec, fmt)


def check_batches(fmt: str) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """The ``mapInArrow`` function of :func:`check_in_tasks`' Spark job: paths -> checks."""

    def check(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            found = [asdict(check_file(p, fmt)) for p in batch.column(0).to_pylist()]
            yield pa.RecordBatch.from_pylist(found, schema=CHECK_SCHEMA)

    return check


CHECK_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("reason", pa.string()),
        ("where", pa.string()),
        ("stopped_at_byte", pa.int64()),
        ("lines_read", pa.int64()),
        ("unchecked", pa.string()),
    ]
)
CHECK_DDL = (
    "path string, reason string, where string, stopped_at_byte bigint, lines_read bigint, "
    "unchecked string"
)


def needs_reading(name: str, fmt: str) -> bool:
    """Whether checking the file reads it whole (a compressed or a CSV file), not its tail."""
    return fmt == "csv" or codec_of(name) is not None


def check_files_here(files: list[str], fmt: str, threads: int = 0) -> list[FileCheck]:
    """:func:`check_file` of each file by ``threads`` threads of this process (0: one a core;
    the codecs release the GIL), in ``files``' order."""
    if not files:
        return []
    threads = max(1, min(len(files), threads or os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda name: check_file(name, fmt), files))


def check_in_tasks(spark: SparkSession, files: list[str], fmt: str) -> list[FileCheck]:
    """:func:`check_file` of each file by Spark tasks (a few files each, at most four tasks a
    core), in ``files``' order."""
    paths = spark.createDataFrame([(f,) for f in files], "path string")
    tasks = min(len(files), 4 * default_parallelism(spark))
    rows = paths.repartition(tasks).mapInArrow(check_batches(fmt), CHECK_DDL).collect()
    found = {row["path"]: FileCheck(**row.asDict()) for row in rows}
    return [found[f] for f in files]


def check_text_files(spark: SparkSession, files: list[str], fmt: str) -> list[FileCheck]:
    """:func:`check_file` of each JSON lines or CSV file, in ``files``' order: local files by
    threads here (one a core), others by one Spark task each (Python workers opening them with
    PyArrow's file systems)."""
    local = [f for f in files if is_local_path(f)]
    remote = [f for f in files if not is_local_path(f)]
    found = dict(zip(local, check_files_here(local, fmt, default_parallelism(spark)), strict=True))
    if remote:
        found.update(zip(remote, check_in_tasks(spark, remote, fmt), strict=True))
    unchecked = [c for c in found.values() if c.unchecked]
    if unchecked:
        log.warning(
            "%d input file(s) could not be opened to check that they are whole, and are left to "
            "Spark's reader: %s (%s)",
            len(unchecked),
            unchecked[0].path,
            unchecked[0].unchecked,
        )
    return [found[f] for f in files]


def footer_check(footer: Footer, fmt: str) -> FileCheck:
    """A Parquet or ORC file by its footer (:func:`~neardup_spark.io.schemas.read_footer`): one
    cut short has lost it, and reading stopped at its end."""
    if footer.problem is None:
        return FileCheck(footer.path)
    try:
        size: int | None = os.path.getsize(local_path(footer.path))
    except OSError:
        size = None
    at = f"its last bytes (the file is {size:,} bytes)" if size is not None else "its end"
    where = f"no readable footer in {at}, cut short or not {FORMAT_NAMES[fmt]}: {footer.problem}"
    return FileCheck(footer.path, UNREADABLE_FOOTER, where, size)


def described(check: FileCheck, fmt: str) -> str:
    """``PATH (FORMAT[, codec]): where reading stopped`` for messages and warnings."""
    codec = codec_of(check.path) if fmt in ("json", "csv") else None
    kind = FORMAT_NAMES[fmt] + (f", {codec}" if codec else "")
    return f"{check.path} ({kind}): {check.where}"


def skipped_entry(check: FileCheck, fmt: str) -> dict[str, Any]:
    """A file skipped whole, as report.json's ``skipped_files`` lists it."""
    entry: dict[str, Any] = {
        "path": check.path,
        "format": fmt,
        "reason": check.reason,
        "error": described(check, fmt),
    }
    if check.stopped_at_byte is not None:
        entry["stopped_at_byte"] = check.stopped_at_byte
    if check.lines_read is not None:
        entry["lines_read"] = check.lines_read
    return entry


def warn_skipped(bad: list[FileCheck], fmt: str) -> None:
    """One warning line a skipped file (the console shows them), :data:`MAX_WARNINGS` at most."""
    for check in bad[:MAX_WARNINGS]:
        log.warning("skipping a whole input file (--skip-corrupt): %s", described(check, fmt))
    if len(bad) > MAX_WARNINGS:
        more = len(bad) - MAX_WARNINGS
        log.warning("skipping %d more whole input file(s), listed in report.json", more)


def refuse_or_skip(
    checks: list[FileCheck], shown: str, fmt: str, skip_corrupt: bool
) -> list[dict[str, Any]]:
    """The files of ``checks`` that are not whole: a :class:`UserError` naming them (file,
    format, where reading stopped) or, with ``skip_corrupt``, a warning line each and their
    ``skipped_files`` entries. ``shown``: the input as messages name it."""
    bad = [c for c in checks if c.reason is not None]
    if bad and not skip_corrupt:
        listed = "; ".join(described(c, fmt) for c in bad[:MAX_FILES_IN_MESSAGE])
        more = (
            f"; and {len(bad) - MAX_FILES_IN_MESSAGE} more"
            if len(bad) > MAX_FILES_IN_MESSAGE
            else ""
        )
        raise UserError(
            f"{len(bad)} unreadable {FORMAT_NAMES[fmt]} file(s) under {shown}: {listed}{more}. "
            "Fix or remove them, or pass --skip-corrupt to go on without them (each skipped "
            "whole and listed in report.json)."
        )
    warn_skipped(bad, fmt)
    return [skipped_entry(c, fmt) for c in bad]


_FAILED_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?(?:\s|$)")
_CAUSE = re.compile(r"^Caused by: (?:[\w$]+\.)*([\w$]+): ?(.*)$", re.MULTILINE)
_NOISE = ("An error occurred while calling", "at ", "...", "Caused by:", "JVM stacktrace")


def spark_error_text(exc: BaseException) -> str:
    """What a failed Spark read says, in one line: the file it names and the error's root cause,
    without the Py4J call (``An error occurred while calling o61.load``) or a stack trace."""
    text = str(exc)
    failed = _FAILED_FILE.search(text)
    causes = _CAUSE.findall(text)
    if failed is not None:
        cause = f": {causes[-1][0]}: {causes[-1][1]}".rstrip(": ") if causes else ""
        return f"error reading {failed.group(1)}{cause}"[:400]
    lines = [line.strip().removeprefix(": ") for line in text.splitlines()]
    kept = [line for line in lines if line and not line.startswith(_NOISE)]
    return (kept[0] if kept else type(exc).__name__)[:400]
