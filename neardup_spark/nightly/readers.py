"""Reader leases: a run that only reads an index (``neardup match``) names the version it reads
in ``DIR/_readers/TOKEN.json`` and beats it while it reads, without the writers' lock, so it
runs while a night writes. A writer's garbage collection keeps every version a live reader
names besides the last ``keep`` (:func:`held_versions`); a reader whose beats stopped longer
than the writers' stale limit holds nothing, and its file is removed by the next collection.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from neardup_spark.io.filesystem import Storage, join
from neardup_spark.io.lease import HEARTBEAT_SECONDS, STALE_AFTER_SECONDS, Holder

log = logging.getLogger(__name__)

READERS_DIR = "_readers"


@contextmanager
def reading(
    storage: Storage,
    root: str,
    version: str | None,
    purpose: str,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
) -> Iterator[None]:
    """Hold a reader lease on ``version`` of the index at ``root`` for the ``with`` block (no
    lease for an index without a version)."""
    if version is None:
        yield
        return
    holder = Holder.this_process(purpose)
    path = join(root, READERS_DIR, f"{holder.token}.json")
    stop = threading.Event()

    def beat() -> None:
        entry = {"version": version, "holder": json.loads(holder.to_text()), "at": time.time()}
        storage.replace_text(path, json.dumps(entry) + "\n")

    def beats() -> None:
        while not stop.wait(heartbeat_seconds):
            try:
                beat()
            except Exception as exc:  # a storage hiccup: the next beat tries again
                log.warning("reader lease on %s: beat failed (%s)", root, exc)

    beat()
    thread = threading.Thread(target=beats, name=f"reader-lease {root}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)
        try:
            storage.delete(path)
        except Exception as exc:  # stale at once for the next writer's collection
            log.warning("could not remove the reader lease %s: %s", path, exc)


def held_versions(
    storage: Storage, root: str, stale_after: float = STALE_AFTER_SECONDS
) -> tuple[set[str], list[str]]:
    """The versions live readers of the index at ``root`` hold, and the paths of the stale
    readers' files (beats older than ``stale_after`` seconds, or unreadable)."""
    directory = join(root, READERS_DIR)
    if not storage.exists(directory):
        return set(), []
    held, stale = set(), []
    now = time.time()
    for name in storage.list(directory):
        path = join(directory, name)
        try:
            entry = json.loads(storage.read_text(path) or "")
            fresh = now - float(entry["at"]) < stale_after
            version = str(entry["version"])
        except (ValueError, KeyError, TypeError):
            fresh, version = False, ""
        if fresh:
            held.add(version)
        elif name.endswith(".json"):
            stale.append(path)
    return held, stale
