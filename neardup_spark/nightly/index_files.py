"""What in an index directory the job wrote, and the clean-up that deletes only that.

The index holds the job's ownership record (:mod:`neardup_spark.io.ownership`,
``DIR/_neardup.json``): every version directory, segment and batch results directory a run
creates is listed there before it is written (:func:`claim_entries`), with the commit log and
``CURRENT``. The clean-up (:func:`collect_garbage`) deletes a listed entry once no kept version
refers to it: debris of killed runs, versions older than the last kept, segments and results
only they used. Nothing else is deleted, whatever its name: a file the user put into the index
stays where it is. An index written before the record adopts one at its first write: what its
versions' manifests name (debris of that version's killed runs is then left in place, logged).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

from neardup_spark.errors import IndexDamaged, UserError
from neardup_spark.io.filesystem import Storage, basename, join
from neardup_spark.io.output import MANIFEST_FILE
from neardup_spark.io.ownership import (
    Ownership,
    claimed_before,
    describe,
    unproven_entries,
    write_ownership,
)
from neardup_spark.nightly.layout import (
    BATCHES,
    COMMIT_ENTRY,
    COMMITS_DIR,
    CURRENT_FILE,
    SEGMENTS,
    VERSION_NAME,
    version_number,
)
from neardup_spark.nightly.readers import held_versions

log = logging.getLogger(__name__)

KIND = "index"


def version_chain(
    storage: Storage, root: str, manifest: dict[str, Any] | None, most: int | None = None
) -> list[dict[str, Any]]:
    """``manifest`` and the manifests before it (``previous``), newest first, up to ``most``;
    the chain ends where a version's manifest is gone."""
    chain: list[dict[str, Any]] = []
    while manifest is not None and (most is None or len(chain) < max(most, 1)):
        chain.append(manifest)
        previous = manifest.get("previous")
        text = storage.read_text(join(root, previous, MANIFEST_FILE)) if previous else None
        manifest = json.loads(text) if text else None
    return chain


def entries_of(manifests: Iterable[dict[str, Any]]) -> set[str]:
    """The index entries (relative paths) the ``manifests`` refer to: their version
    directories, segments and batch results."""
    found: set[str] = set()
    for m in manifests:
        found.add(m["name"])
        found.update(f"{SEGMENTS}/{s['name']}" for s in m["segments"])
        found.update(
            f"{BATCHES}/{basename(b['results'])}" for b in m["batches"] if b.get("results")
        )
    return found


def index_ownership(storage: Storage, root: str, manifest: dict[str, Any] | None) -> Ownership:
    """The index's record; for an index written before it, one adopted from its versions'
    manifests (debris of killed runs, which nothing names, is left in place)."""
    found = claimed_before(storage, root)
    if found is not None:
        return found
    adopted = Ownership(KIND, files={CURRENT_FILE}, dirs={COMMITS_DIR})
    adopted.dirs |= entries_of(version_chain(storage, root, manifest))
    if manifest is not None:
        left = unproven_entries(storage, root, adopted)
        if left:
            log.info(
                "index %s: left in place, written by no recorded run: %s", root, describe(left)
            )
    return adopted


def claim_entries(
    storage: Storage, root: str, manifest: dict[str, Any] | None, dirs: Iterable[str]
) -> None:
    """Record ``dirs`` (relative paths) as the job's in the index's record before a run writes
    them (with the commit log and ``CURRENT``, which every run writes)."""
    ownership = index_ownership(storage, root, manifest)
    wanted = {*dirs, COMMITS_DIR}
    if not wanted <= ownership.dirs or CURRENT_FILE not in ownership.files:
        ownership.dirs |= wanted
        ownership.files.add(CURRENT_FILE)
        write_ownership(storage, root, ownership)


def check_new_index_dir(storage: Storage, root: str) -> None:
    """Refuse to take ``root`` (no committed version) for a new index when it holds what the
    job cannot prove it wrote (a :class:`UserError`), or versions beyond a first one whose
    ``CURRENT`` is gone (:class:`IndexDamaged`: an index written before the commit log)."""
    numbers = [
        version_number(entry)
        for entry in storage.list(root)
        if storage.exists(join(root, entry, MANIFEST_FILE))
    ]
    newest = max((n for n in numbers if n is not None), default=0)
    if newest > 1:
        raise IndexDamaged(
            f"index {root}: versions up to v{newest:06d} exist but neither {CURRENT_FILE} nor "
            f"{COMMITS_DIR}/ names a committed one; nothing was changed. Restore {CURRENT_FILE} "
            "from a copy of the index, or write the newest complete version's directory name "
            f"into {root}/{CURRENT_FILE}"
        )
    record = claimed_before(storage, root) or Ownership(KIND)
    foreign = unproven_entries(storage, root, record)
    if foreign:
        raise UserError(
            f"index directory {root} exists but is not a neardup index (it holds "
            f"{describe(foreign)}); nothing was changed: choose an empty or new directory"
        )


def collect_garbage(
    storage: Storage,
    root: str,
    manifest: dict[str, Any] | None,
    keep: int,
    before_each: Callable[[], None],
) -> list[str]:
    """Delete the entries of the index's record that no kept version (the last ``keep``, and
    those a live reader holds: :mod:`.readers`) refers to, and the commit log's entries older
    than every kept version (and than the one ``CURRENT`` names); ``before_each`` runs before
    each deletion (the lease's check). Returns the deleted paths."""
    before_each()
    ownership = index_ownership(storage, root, manifest)
    kept = version_chain(storage, root, manifest, keep)
    held, stale_readers = held_versions(storage, root)
    names = {m["name"] for m in kept}
    for name in sorted(held - names):  # older versions a reader still reads
        text = storage.read_text(join(root, name, MANIFEST_FILE))
        if text:
            kept.append(json.loads(text))
    kept_entries = entries_of(kept)
    pointer = version_number((storage.read_text(join(root, CURRENT_FILE)) or "").strip())
    log_floor = min([int(m["version"]) for m in kept] + [pointer or 0])
    doomed = sorted(d for d in ownership.dirs if d != COMMITS_DIR and d not in kept_entries)
    doomed = [d for d in doomed if _is_entry_name(d) and storage.exists(join(root, d))]
    doomed += [
        n for n in storage.list(root) if n.startswith(f".{CURRENT_FILE}.") and n.endswith(".tmp")
    ]
    if COMMITS_DIR in ownership.dirs:
        for entry in storage.list(join(root, COMMITS_DIR)):
            match = COMMIT_ENTRY.match(entry)
            if (match and int(match.group(1)) < log_floor) or (
                entry.startswith(".") and entry.endswith(".tmp")
            ):
                doomed.append(f"{COMMITS_DIR}/{entry}")
    deleted = []
    for path in stale_readers:  # readers whose beats stopped: they hold nothing
        storage.delete(path)
    for rel in doomed:
        before_each()
        storage.delete(join(root, rel))
        deleted.append(join(root, rel))
    gone = {d for d in ownership.dirs if d != COMMITS_DIR and d not in kept_entries}
    if deleted or gone or claimed_before(storage, root) is None:
        ownership.dirs -= gone
        write_ownership(storage, root, ownership)
    if deleted:
        log.info("index %s: removed %d unreferenced entries", root, len(deleted))
    return deleted


def _is_entry_name(rel: str) -> bool:
    """A version directory, a segment or a batch's results (what a run claims)."""
    head, _, name = rel.rpartition("/")
    return bool(VERSION_NAME.match(rel)) or (head in (SEGMENTS, BATCHES) and bool(name))
