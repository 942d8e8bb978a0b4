"""Spark's failure reading a file of the input, found mid-run, as one line (exit 2).

A file whose footer reads may still hold damaged data pages (a codec's error, a page that does
not decode): Spark's reader finds them when a job reads the rows, and fails the job with a
Java stack trace whose text says ``[FAILED_READ_FILE...] Encountered error while reading file
PATH`` and, below, what failed (``Caused by: java.io.IOException: FAILED_TO_UNCOMPRESS(5)``).
:func:`failed_input_read` turns such an error, when PATH is a file of the run's input, into the
message :func:`~neardup_spark.batch.input_reads.unreadable_input` gives PyArrow's reads of the
same file: the file, its format, what failed. A file of the run's own (a staged result, the
index) is not the user's input: its failure stays a job failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from neardup_spark.batch.input_reads import MAX_ERROR_CHARS, unreadable_input
from neardup_spark.io.corpus import comparable_path
from neardup_spark.io.format_names import FORMAT_NAMES, format_of
from neardup_spark.io.globs import has_glob, segment_regex
from neardup_spark.io.paths import from_spark_uri, is_local_path, local_path

FAILED_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?(?:\s|$)")
CAUSE = re.compile(r"^Caused by: (?:[\w$]+\.)*([\w$]+): ?(.*)$", re.MULTILINE)


def is_under(path: str, given: str) -> bool:
    """Whether ``path`` (a file) is, or lies under, ``given`` (a path or one of Hadoop's globs,
    a matched directory read whole).

    >>> is_under("file:/data/in/a.parquet", "/data/in"), is_under("/data/out/x", "/data/in")
    (True, False)
    >>> is_under("/data/in/day=2/a.parquet", "/data/in/day=*"), is_under("/data/i", "/data/in")
    (True, False)
    """
    wanted = comparable_path(given).split("/")
    found = comparable_path(path).split("/")
    if wanted == [""]:  # "/": everything is under it
        return True
    if len(found) < len(wanted):
        return False
    if not has_glob(given):
        return found[: len(wanted)] == wanted
    return all(
        segment_regex(w).fullmatch(f) is not None for w, f in zip(wanted, found, strict=False)
    )


def failed_input_read(
    exc: BaseException, inputs: Sequence[str], fmt: str | None = None
) -> str | None:
    """The one-line message of ``exc`` (or an error it was raised from) when it is Spark's
    failure reading a file at or under one of ``inputs`` (the paths the command was given;
    ``fmt``: the ``--input-format`` given, for a file whose name says none), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen)
        failed = FAILED_FILE.search(text)
        if failed is not None:
            path = from_spark_uri(failed.group(1))
            if not any(is_under(path, given) for given in inputs):
                return None
            path = local_path(path) if is_local_path(path) else path
            kind = format_of(path) or fmt
            named = FORMAT_NAMES.get(kind, kind) if kind else "format not told by its name"
            return str(unreadable_input(path, named, "it with Spark", causes_of(text)))
        seen = seen.__cause__ or seen.__context__
    return None


def causes_of(text: str) -> str:
    """What a Java error's ``Caused by:`` lines say, innermost last, without their packages
    (the error's first line when it has none).

    >>> causes_of("x\\nCaused by: java.io.IOException: could not decode\\n\\tat a.b\\n"
    ...           "Caused by: java.io.IOException: FAILED_TO_UNCOMPRESS(5)")
    'IOException: could not decode; IOException: FAILED_TO_UNCOMPRESS(5)'
    """
    found = [f"{name}: {message.strip()}".rstrip(": ") for name, message in CAUSE.findall(text)]
    shown = "; ".join(dict.fromkeys(found)) or text.strip().splitlines()[0]
    return shown[:MAX_ERROR_CHARS]
