"""The index directory's names and its commit log (docs in :mod:`~neardup_spark.nightly.store`):
which version is committed, read from ``CURRENT`` and ``_commits/``."""

from __future__ import annotations

import json
import re

from neardup_spark.io.filesystem import Storage, join

CURRENT_FILE = "CURRENT"
COMMITS_DIR = "_commits"
SEGMENTS, BATCHES = "segments", "batches"
VERSION_NAME = re.compile(r"^v(\d{6,})-([0-9a-f]+)$")
COMMIT_ENTRY = re.compile(r"^v(\d{6,})$")


def commit_entry_path(root: str, version: int) -> str:
    """The commit log's entry for version number ``version``."""
    return join(root, COMMITS_DIR, f"v{version:06d}")


def version_number(name: str) -> int | None:
    """``12`` for ``"v000012-3fa9c2d1"``; None for a name that is not a version's."""
    match = VERSION_NAME.match(name)
    return int(match.group(1)) if match else None


def logged_versions(storage: Storage, root: str) -> list[int]:
    """The version numbers of the commit log's entries, ascending."""
    found = (COMMIT_ENTRY.match(entry) for entry in storage.list(join(root, COMMITS_DIR)))
    return sorted(int(match.group(1)) for match in found if match)


def committed_name(storage: Storage, root: str) -> str | None:
    """The committed version's name: ``CURRENT``'s, rolled forward along the commit log (a run
    killed after its log entry, before replacing ``CURRENT``, has committed); None: none yet.

    Without ``CURRENT`` (never written: a first commit's run killed before it, or lost: a
    replace that deletes before it renames, on object stores), the log's newest entry: its
    oldest entries go with old versions (:meth:`Index.collect_garbage`), so counting from
    version 1 would find nothing and take a committed index for a new one."""
    pointer = storage.read_text(join(root, CURRENT_FILE))
    name = pointer.strip() if pointer is not None else None
    number = version_number(name) if name is not None else 0
    if pointer is None:
        logged = logged_versions(storage, root)
        number = logged[-1] - 1 if logged else 0
    while number is not None:
        entry = storage.read_text(commit_entry_path(root, number + 1))
        if entry is None:
            break
        name, number = json.loads(entry)["name"], number + 1
    return name
