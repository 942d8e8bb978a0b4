"""``--prefer``'s small language: ``"COLUMN [asc|desc][, COLUMN ...]"``, names as they are,
in backticks where they hold spaces or commas."""

from __future__ import annotations

import re

from neardup_spark.errors import UserError

SORT_WAYS = ("asc", "desc")
PREFER_SYNTAX = (
    'prefer takes "COLUMN [asc|desc][, COLUMN [asc|desc] ...]", a name holding spaces or commas '
    "in backticks (`fetch date` desc; a backtick in it doubled)"
)
# A name in backticks, a backtick in it doubled.
QUOTED_NAME = re.compile(r"`((?:[^`]|``)*)`")


def parse_prefer(text: str) -> tuple[tuple[str, bool], ...]:
    """``--prefer "COL [asc|desc][, COL ...]"`` -> ``((column, descending), ...)``.

    A name is taken as it is (dots, brackets, any letters: the column of that exact name); one
    holding spaces or commas, or starting with a backtick, is written in backticks, a backtick
    in it doubled.

    >>> parse_prefer("quality desc, fetch_date")
    (('quality', True), ('fetch_date', False))
    >>> parse_prefer("`fetch date` DESC, meta.score, `we``ird`, desc desc")
    (('fetch date', True), ('meta.score', False), ('we`ird', False), ('desc', True))
    """
    keys = []
    rest = text.strip()
    while True:
        name, rest = prefer_name(rest, text)
        way, comma, rest = rest.partition(",")
        words = way.split()
        if not name or len(words) > 1 or (words and words[0].lower() not in SORT_WAYS):
            raise UserError(f"{PREFER_SYNTAX}, got {text!r}")
        keys.append((name, bool(words) and words[0].lower() == "desc"))
        if not comma:
            return tuple(keys)
        rest = rest.strip()


def prefer_name(rest: str, text: str) -> tuple[str, str]:
    """The column name ``rest`` (of ``--prefer text``) starts with, and what follows it."""
    if not rest.startswith("`"):
        name = re.split(r"[\s,]", rest, maxsplit=1)[0]
        return name, rest[len(name) :]
    quoted = QUOTED_NAME.match(rest)
    after = rest[quoted.end() :] if quoted else ""
    if quoted is None or not (after[:1] in ("", ",") or after[:1].isspace()):
        raise UserError(f"{PREFER_SYNTAX}; no closing backtick after a name in {text!r}")
    return quoted.group(1).replace("``", "`"), after


def prefer_spelling(name: str) -> str:
    """``name`` as ``--prefer`` takes it: in backticks (a backtick in it doubled) when it holds
    a space or a comma or starts with a backtick, else as it is.

    >>> prefer_spelling("note, desc"), prefer_spelling("we`ird"), prefer_spelling("`x`")
    ('`note, desc`', 'we`ird', '```x```')
    """
    if name.startswith("`") or re.search(r"[\s,]", name):
        return "`" + name.replace("`", "``") + "`"
    return name


def prefer_hint(name: str, present: list[str]) -> str:
    """For a ``--prefer`` column ``name`` missing from ``present``: how to write the present
    columns whose names hold it and need backticks (``note`` of ``note, desc``); else ``""``."""
    spelled = [prefer_spelling(c) for c in present if name in c and prefer_spelling(c) != c]
    return f" (in --prefer, write {' or '.join(spelled[:3])})" if spelled else ""
