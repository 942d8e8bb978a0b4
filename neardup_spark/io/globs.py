"""Hadoop's glob syntax (what ``spark.read`` accepts in a path), matched one path segment at a
time, for the file systems this process lists itself (local disk, PyArrow's): ``*`` and ``?``
within a segment, ``[abc]``, ``[a-z]``, ``[^a]``, ``{a,b}`` (which may hold ``/``-free
alternatives), and ``\\`` to take the next character literally."""

from __future__ import annotations

import re
from functools import lru_cache

GLOB_CHARS = "*?[{"


def has_glob(path: str) -> bool:
    """``path`` holds one of Hadoop's glob characters."""
    return any(c in path for c in GLOB_CHARS)


@lru_cache(maxsize=256)
def segment_regex(segment: str) -> re.Pattern[str]:
    """The regular expression one path segment of a glob stands for.

    >>> bool(segment_regex("part-*.parquet").fullmatch("part-00001.parquet"))
    True
    >>> [bool(segment_regex("{a,b}[0-9]?").fullmatch(n)) for n in ("a1x", "b12", "c1x", "a1")]
    [True, True, False, False]
    >>> bool(segment_regex(r"a\\*b").fullmatch("a*b")), bool(segment_regex("[^x]").fullmatch("x"))
    (True, False)
    """
    out: list[str] = []
    depth = 0  # inside {...}
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "\\" and i + 1 < len(segment):
            out.append(re.escape(segment[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("^", "!") else i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = segment[i + 1 : end]
                if body[:1] in ("^", "!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    out.extend(")" * depth)
    return re.compile("".join(out), re.DOTALL)


def split_glob(path: str) -> tuple[str, list[str]]:
    """``(fixed prefix, glob segments)``: the directory to list from, and the segments below it
    to match, the first of which holds a glob character.

    >>> split_glob("/data/crawl/*/part-*.json")
    ('/data/crawl', ['*', 'part-*.json'])
    >>> split_glob("s3://b/x/{a,b}")
    ('s3://b/x', ['{a,b}'])
    >>> split_glob("crawl-*/part-*"), split_glob("/*.json")
    (('.', ['crawl-*', 'part-*']), ('/', ['*.json']))
    """
    parts = path.split("/")
    for index, part in enumerate(parts):
        if has_glob(part):
            # A relative glob from its first segment on is listed from the working directory
            # (as Spark reads it), not from the root.
            return "/".join(parts[:index]) or ("." if index == 0 else "/"), parts[index:]
    return path, []
