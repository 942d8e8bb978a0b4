"""What the job wrote in a directory it writes: the ownership record ``_neardup.json``.

The job deletes or replaces only what it can prove it wrote. Each directory a command writes
(an OUTPUT, an index, ``neardup generate``'s DIRECTORY) holds this record, written before
anything else of the job goes there and brought up to date before each write at its top level:

* ``run_id``: the run that last claimed the directory;
* ``files``: the files the job wrote, as paths relative to the directory;
* ``dirs``: the directories the job created and alone writes into (a run's staging directory),
  owned with everything under them.

Everything else is the user's, whatever its name: a file that the record does not list stops a
run that would replace it (:func:`unproven_entries`, then a :class:`~neardup_spark.errors.
UserError` naming it), and nothing the job does deletes it. Hadoop's checksum files
(``.NAME.crc``) go with the file they belong to. The record is replaced atomically (a reader
sees the old one or the new one), and it lists a file before the file is written, so a run
killed at any point leaves a record that covers everything it wrote.

An OUTPUT written by a version without the record (``legacy``) proves only what a finished
run's manifest stands for: Spark's data files (``part-*``) and the job's own files under the
names its layout commits.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from neardup_spark import __version__
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import Storage, join
from neardup_spark.io.lease import is_lease_entry

OWNERSHIP_FILE = "_neardup.json"
WRITER = "neardup-spark"
# How many entries a refusal names (then "and N more").
MOST_NAMED = 8


@dataclass
class Ownership:
    """The record of one directory: what the job wrote there."""

    kind: str
    run_id: str | None = None
    files: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)

    def proves(self, rel: str) -> bool:
        """Whether the job wrote ``rel`` (a file, or a directory on the way to one)."""
        if rel == OWNERSHIP_FILE or rel in self.files or self._in_owned_dir(rel):
            return True
        head, _, name = rel.rpartition("/")
        if name.startswith(".") and name.endswith(".crc"):  # Hadoop's checksum of a file
            return join_rel(head, name[1:-4]) in self.files
        return False

    def proves_dir(self, rel: str) -> bool:
        """Whether ``rel`` is a directory the job made: an owned one, or one holding (at any
        depth) a file the job wrote."""
        prefix = rel + "/"
        return self._in_owned_dir(rel) or any(
            f.startswith(prefix) for f in (*self.files, *self.dirs)
        )

    def _in_owned_dir(self, rel: str) -> bool:
        return any(rel == d or rel.startswith(d + "/") for d in self.dirs)

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "written_by": f"{WRITER} {__version__}",
            "kind": self.kind,
            "run_id": self.run_id,
            "updated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "dirs": sorted(self.dirs),
            "files": sorted(self.files),
        }
        return json.dumps(data, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Ownership | None:
        """The record in ``text``; None when it is not one the job wrote."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or not str(data.get("written_by", "")).startswith(WRITER):
            return None
        files, dirs = data.get("files"), data.get("dirs")
        if not isinstance(files, list) or not isinstance(dirs, list):
            return None
        return cls(str(data.get("kind")), data.get("run_id"), set(map(str, files)), set(dirs))


def join_rel(head: str, name: str) -> str:
    """``head/name``, or ``name`` at the top."""
    return f"{head}/{name}" if head else name


def read_ownership(storage: Storage, root: str) -> Ownership | None:
    """``root``'s record; None when there is none, or the file there is not the job's."""
    text = storage.read_text(join(root, OWNERSHIP_FILE))
    return None if text is None else Ownership.from_json(text)


def claimed_before(storage: Storage, root: str) -> Ownership | None:
    """``root``'s record, None when there is none; a file named as the record that is not the
    job's is a :class:`UserError` (the directory is someone else's)."""
    found = read_ownership(storage, root)
    if found is None and storage.exists(join(root, OWNERSHIP_FILE)):
        raise UserError(
            f"{join(root, OWNERSHIP_FILE)} was not written by this job: {root} is someone "
            "else's directory; nothing was changed. Choose an empty or new directory"
        )
    return found


def write_ownership(storage: Storage, root: str, ownership: Ownership) -> None:
    """Replace ``root``'s record (atomically where the file system renames atomically)."""
    storage.replace_text(join(root, OWNERSHIP_FILE), ownership.to_json())


def directory_tree(storage: Storage, root: str) -> tuple[list[str], list[str]]:
    """The files and the directories under ``root`` (relative paths, sorted): one recursive
    listing of the files, then one listing per directory (for the empty ones)."""
    top = storage.status(root)
    if top is None or not top.is_dir:
        return [], []
    prefix = top.path.rstrip("/") + "/"
    files = sorted(s.path[len(prefix) :] for s in storage.walk_files(root) if not s.is_dir)
    file_set, dirs, pending = set(files), [], [""]
    while pending:
        rel = pending.pop()
        for name in storage.list(join(root, rel) if rel else root):
            child = join_rel(rel, name)
            if child not in file_set:
                dirs.append(child)
                pending.append(child)
    return files, sorted(dirs)


def unproven_entries(
    storage: Storage, root: str, ownership: Ownership, within: Iterable[str] | None = None
) -> list[str]:
    """The files and directories (named with a trailing ``/``) under ``root`` that
    ``ownership`` does not prove the job wrote, the lease's files aside, shallowest first;
    ``within``: only under these top-level names. A directory holding nothing of the job's is
    named instead of what it holds."""
    files, dirs = directory_tree(storage, root)
    names = None if within is None else set(within)
    found: list[str] = []
    for rel, is_dir in [*((d, True) for d in dirs), *((f, False) for f in files)]:
        top = rel.split("/", 1)[0]
        if is_lease_entry(top) or (names is not None and top not in names):
            continue
        if ownership.proves_dir(rel) if is_dir else ownership.proves(rel):
            continue
        if any(rel.startswith(shown) for shown in found if shown.endswith("/")):
            continue  # inside a directory already named
        found.append(rel + "/" if is_dir else rel)
    return sorted(found, key=lambda r: (r.rstrip("/").count("/"), r))


def describe(entries: list[str]) -> str:
    """The first entries of a list for a message: ``a, b/, c (and 3 more)``."""
    shown = entries[:MOST_NAMED]
    more = len(entries) - len(shown)
    return ", ".join(shown) + (f" (and {more} more)" if more else "")


def claim_to_replace(
    storage: Storage,
    root: str,
    names: Iterable[str],
    kind: str,
    legacy: Callable[[str], bool] = lambda rel: False,
) -> Ownership:
    """``root``'s record, after checking that everything under the top-level ``names`` (what a
    command replaces) is the job's: a :class:`UserError` naming what is not. Without a record,
    the files ``legacy`` accepts (what an earlier version wrote there, by name) are the job's."""
    found = claimed_before(storage, root)
    if found is None:
        files = directory_tree(storage, root)[0]
        found = Ownership(kind, files={f for f in files if legacy(f)})
    unproven = unproven_entries(storage, root, found, within=names)
    if unproven:
        raise UserError(
            f"{root} holds files this job did not write: {describe(unproven)}. Nothing was "
            "changed: the job deletes or replaces only what it wrote (--overwrite too); move "
            "them away or choose another directory"
        )
    return found
