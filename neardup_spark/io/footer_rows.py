"""The rows an input's footers say it holds, checked against the rows a run read.

A Parquet or ORC file's footer gives its number of rows, and the corpus's footers are read once
before a run (:mod:`.schemas`: schemas, files cut short). :func:`with_footer_rows` keeps their
sum with the DataFrame :func:`~neardup_spark.io.corpus.read_corpus` returns (for the files it
reads, not those skipped; only when every one of them was read here: local files), and after
the per-document pass the run compares it with the rows read (:func:`check_rows_read`; the full
run, the nightly run and ``neardup boilerplate``). A difference means the input changed under
the run, or a reader lost rows (a setting such as ``spark.sql.files.ignoreMissingFiles``): an
:class:`~neardup_spark.errors.InputChanged` naming both numbers, never a silent partial read.
JSON lines and CSV files say nothing of their rows before they are read: they are checked to
their end instead (:mod:`.whole_files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from weakref import WeakKeyDictionary

from pyspark.sql import DataFrame

from neardup_spark.errors import InputChanged
from neardup_spark.io.schemas import Footer

# The rows the footers of a DataFrame's files give, by the DataFrame read_corpus returned
# (weakly: forgotten with it).
_FOOTER_ROWS: WeakKeyDictionary[DataFrame, int] = WeakKeyDictionary()


def with_footer_rows(df: DataFrame, footers: Sequence[Footer]) -> DataFrame:
    """``df``, the read of the files whose readable ``footers`` are given (those with a
    ``problem`` were skipped), remembered as holding the rows those footers give; nothing is
    remembered unless every one of them gave its rows."""
    read = [footer for footer in footers if footer.problem is None]
    if read and all(footer.rows is not None for footer in read):
        _FOOTER_ROWS[df] = sum(footer.rows or 0 for footer in read)
    return df


def footer_rows(df: DataFrame) -> int | None:
    """The rows the footers of ``df``'s files give (:func:`with_footer_rows`), else None."""
    return _FOOTER_ROWS.get(df)


def check_rows_read(expected: int | None, read: int, shown: str) -> None:
    """An :class:`~neardup_spark.errors.InputChanged` when ``read``, the rows a run read from
    ``shown``, is not ``expected``, the rows its files' footers give (None: not known).

    >>> check_rows_read(10, 10, "in/"), check_rows_read(None, 3, "in/")
    (None, None)
    >>> check_rows_read(10, 7, "in/")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    neardup_spark.errors.InputChanged: 7 rows were read from in/ but ... give 10 (3 fewer): ...
    """
    if expected is None or read == expected:
        return
    gap = f"{abs(expected - read):,} {'fewer' if read < expected else 'more'}"
    raise InputChanged(
        f"{read:,} rows were read from {shown} but its files' footers give {expected:,} "
        f"({gap}): the input changed under the run, or a reader lost rows (a setting such as "
        "spark.sql.files.ignoreMissingFiles); run again on an input that does not change while "
        "it is read"
    )
