"""Paths as users write them, and the forms Hadoop and the OS need.

A user path is a URI when it starts with ``SCHEME:`` and is a ``file:`` URI or goes on with
``/`` (``file:/x``, ``file:///x``, ``hdfs://nn/x``, ``s3a://bucket/x``); anything else is a
local path, even with a ``:`` in it (``2026:12/day``). Names are taken literally everywhere: no
percent-decoding of what users give (``file:///data/a%20b`` is the directory named ``a%20b``, as
Hadoop and ``spark.read`` take it), no ``#fragment`` or ``?query``. Only the URIs Spark hands
back (``DataFrame.inputFiles()``) are percent-encoded; :func:`from_spark_uri` decodes them.
"""

from __future__ import annotations

import os
import re
import tempfile
from urllib.parse import unquote, urlsplit

from neardup_spark.errors import UserError

# RFC 3986's scheme: a letter, then letters, digits, "+", "-", ".".
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)


def scheme_of(path: str) -> str | None:
    """The URI scheme of ``path`` (lower case), ``None`` for a local path.

    >>> scheme_of("s3a://bucket/x"), scheme_of("file:/x"), scheme_of("FILE:x")
    ('s3a', 'file', 'file')
    >>> scheme_of("my corpus/2026:12"), scheme_of("2026:12/day"), scheme_of("a:b")
    (None, None, None)
    """
    match = _SCHEME.match(path)
    if match is None or len(match.group(1)) == 1:  # "C:" is a drive, not a scheme
        return None
    scheme, rest = match.group(1).lower(), match.group(2)
    return scheme if scheme == "file" or rest.startswith("/") else None


def is_local_path(path: str) -> bool:
    """A plain path or a ``file:`` URI."""
    return scheme_of(path) in (None, "file")


def local_path(path: str) -> str:
    """The OS path of a plain path or a ``file:`` URI, taken literally (``~`` expanded for a
    plain path; relative paths stay relative).

    >>> local_path("file:///data/a#b%20c"), local_path("file:/x"), local_path("a:b/c")
    ('/data/a#b%20c', '/x', 'a:b/c')
    """
    if scheme_of(path) == "file":
        rest = path[len("file:") :]
        if rest.startswith("//"):  # file://HOST/x: only an empty host (or localhost) is ours
            host, sep, tail = rest[2:].partition("/")
            rest = "/" + tail if sep and host in ("", "localhost") else rest[1:]
        return rest
    return os.path.expanduser(path)


def for_hadoop(path: str) -> str:
    """``path`` in a form Hadoop's ``Path`` reads as the same place: a relative local path
    whose first name holds a ``:`` (which Hadoop would take for a scheme: "Relative path in
    absolute URI") made absolute; ``~`` expanded; anything else as given.

    >>> for_hadoop("hdfs://nn/a b"), for_hadoop("/x/a:b"), for_hadoop("file:/x")
    ('hdfs://nn/a b', '/x/a:b', 'file:/x')
    >>> for_hadoop("a:b/c") == os.path.join(os.getcwd(), "a:b/c")
    True
    """
    if scheme_of(path) is not None:
        return path
    expanded = os.path.expanduser(path)
    first = expanded.split("/", 1)[0]
    return os.path.abspath(expanded) if ":" in first else expanded


def from_spark_uri(uri: str) -> str:
    """A file name as ``DataFrame.inputFiles()`` gives it (a percent-encoded URI:
    ``file:///data/my%20corpus/x.parquet``) as a literal path Hadoop reads
    (``file:/data/my corpus/x.parquet``).

    >>> from_spark_uri("file:///d/my%20c%25%23/x.parquet")
    'file:/d/my c%#/x.parquet'
    >>> from_spark_uri("hdfs://nn:8020/a%3Ab/x")
    'hdfs://nn:8020/a:b/x'
    """
    parts = urlsplit(uri, allow_fragments=False)
    if not parts.scheme:
        return unquote(uri)
    authority = f"//{parts.netloc}" if parts.netloc else ""
    query = f"?{parts.query}" if parts.query else ""  # not Spark's: a literal "?" is encoded
    return f"{parts.scheme}:{authority}{unquote(parts.path)}{query}"


def _first_existing(path: str) -> str:
    """``path`` or its nearest ancestor that exists (as anything: a file too)."""
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def check_writable(path: str, role: str) -> None:
    """Refuse (:class:`UserError`) a local ``path`` that cannot become a directory this
    process writes in: it, or a directory it would be created in, is a regular file, or the
    nearest existing directory refuses a probe file (permissions, a read-only file system; a
    probe is written because ``os.access`` says yes to root on most file systems). Other file
    systems are left to Hadoop. ``role`` names the path in the message (``output``, ``index``)."""
    if not is_local_path(path):
        return
    where = local_path(path)
    existing = _first_existing(where)
    if not os.path.isdir(existing):
        if os.path.abspath(existing) == os.path.abspath(where):
            raise UserError(f"{role} {path} exists and is a file, not a directory")
        raise UserError(f"{role} {path} cannot be created: {existing} is a file, not a directory")
    problem = _probe_write(existing)
    if problem is not None:
        raise UserError(f"{role} {path} is not writable: cannot write in {existing} ({problem})")


def _probe_write(directory: str) -> str | None:
    """Why a file cannot be created in ``directory`` (``None`` if it can)."""
    if not os.access(directory, os.W_OK | os.X_OK):
        return "permission denied"
    try:
        handle, probe = tempfile.mkstemp(prefix=".neardup-write-probe-", dir=directory)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    os.close(handle)
    os.unlink(probe)
    return None
