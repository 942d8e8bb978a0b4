"""Output directories: checked, written under a staging directory, then committed.

A run writes everything under ``OUTPUT/_staging/RUN_ID/`` and :meth:`OutputDir.commit` moves it
into place: ``_SUCCESS`` is removed first and written last, so a reader (or a rerun) never takes
a half-replaced OUTPUT for a finished one, and a run killed at any point leaves the previous
outputs intact. Paths go through the session's :class:`~neardup_spark.io.filesystem.Storage`
(local disk, HDFS, object stores; Hadoop's file systems in a classic session, PyArrow's over
Spark Connect).

One run writes an OUTPUT at a time: :meth:`OutputDir.locked` holds the lease ``OUTPUT/_lock``
(:mod:`neardup_spark.io.lease`) from before :meth:`OutputDir.prepare` until after the commit; a
second run waits for it, then finds what the first one left (a finished run: exit 2 unless it
may overwrite it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from neardup_spark.errors import UserError
from neardup_spark.io.lease import LOCK_FILE, Lease, hold_lease, is_lease_entry
from neardup_spark.io.paths import check_writable, for_hadoop
from neardup_spark.io.storage import storage_for

log = logging.getLogger(__name__)

SUCCESS_MARKER = "_SUCCESS"
REPORT_FILE = "report.json"
CHECKPOINT_DIR = "_checkpoints"
STAGING_DIR = "_staging"
MANIFEST_FILE = "manifest.json"
# How Spark names the data files it writes.
DATA_FILE_PREFIX = "part-"


@dataclass(frozen=True)
class OutputLayout:
    """What one kind of run writes into its OUTPUT."""

    # What a commit moves from the staging directory into OUTPUT, in this order.
    committed: tuple[str, ...]
    # Written next to them after the run (report.html), replaced by the next commit.
    extra: tuple[str, ...] = ()
    # The kind of run, for messages ("run", "ingest").
    kind: str = "run"
    # A staged directory of Parquet files (Spark's ``part-*``) that a commit moves into OUTPUT
    # itself, replacing OUTPUT's own: OUTPUT is then a dataset Spark reads (ingest's corpus;
    # everything else such a layout commits is named ``_*``, which readers skip).
    data_dir: str | None = None
    # The manifest's name: ``_manifest.json`` where OUTPUT is a dataset, so readers skip it.
    manifest: str = MANIFEST_FILE

    def is_data_file(self, name: str) -> bool:
        """A file of the dataset at OUTPUT (``part-*``) in a layout with a ``data_dir``."""
        return self.data_dir is not None and name.startswith(
            (DATA_FILE_PREFIX, "." + DATA_FILE_PREFIX)  # Hadoop's checksum files too
        )

    @property
    def known_entries(self) -> frozenset[str]:
        """What a run of ours may leave in OUTPUT (besides data files); anything else there
        means the path is someone else's."""
        return frozenset(
            {
                *self.committed,
                *self.extra,
                SUCCESS_MARKER,
                CHECKPOINT_DIR,
                STAGING_DIR,
                LOCK_FILE,
                self.manifest,
            }
        )


# A dedupe run's output contract (and a nightly run's, which adds changed_clusters/).
DEDUPE_LAYOUT = OutputLayout(
    committed=("clusters", "pairs", "deduplicated", "changed_clusters", REPORT_FILE),
    extra=("report.html",),
)


class OutputDir:
    """An output directory on any file system the session reaches, holding ``layout``'s
    entries."""

    def __init__(
        self, spark: SparkSession, path: str, layout: OutputLayout = DEDUPE_LAYOUT
    ) -> None:
        self.path = for_hadoop(path)  # Spark writes under it: a name Hadoop reads as given
        self.layout = layout
        self._spark = spark
        self.storage = storage_for(spark, self.path)
        self.lease: Lease | None = None  # held by :meth:`locked`, checked by :meth:`commit`

    def child(self, name: str) -> str:
        return self.path.rstrip("/") + "/" + name

    def _where(self, name: str | None) -> str:
        return self.path if name is None else self.child(name)

    def exists(self, name: str | None = None) -> bool:
        return self.storage.exists(self._where(name))

    def delete(self, name: str | None = None) -> None:
        self.storage.delete(self._where(name))

    def entries(self) -> list[str]:
        return self.storage.list(self.path)

    @contextmanager
    def locked(self, timeout: float) -> Iterator[Lease]:
        """OUTPUT's lease for the ``with`` block, waiting up to ``timeout`` seconds for another
        run that holds it (:class:`~neardup_spark.io.lease.LockTimeout`, exit 2, after that)."""
        self._refuse_a_file()
        purpose = f"{self.layout.kind} into {self.path}"
        with hold_lease(self.storage, self.path, purpose, timeout) as held:
            self.lease = held
            try:
                yield held
            finally:
                self.lease = None

    def _refuse_a_file(self) -> None:
        check_writable(self.path, "output")  # before any Spark job: exit 2 naming the path
        status = self.storage.status(self.path)
        if status is not None and not status.is_dir:
            raise UserError(f"output {self.path} exists and is a file")

    def prepare(self, overwrite: bool, clear_staging: bool = True) -> None:
        """Check OUTPUT may be written: refuse a finished run unless ``overwrite``, refuse a
        directory holding files a run of ours would not write, and clear a stale staging area
        (unless ``clear_staging`` is False: a resumable run decides what to keep of it).

        Nothing of a previous run is deleted here: new outputs are staged and replace the old
        ones only at :meth:`commit`, so a run killed at any point leaves them as they were.
        """
        self._refuse_a_file()
        foreign = sorted(
            e
            for e in set(self.entries()) - self.layout.known_entries
            if not self.layout.is_data_file(e) and not is_lease_entry(e)
        )
        if foreign:
            raise UserError(
                f"output {self.path} exists and holds files this job did not write "
                f"({', '.join(foreign[:5])}); choose an empty or new directory"
            )
        if self.exists(SUCCESS_MARKER) and not overwrite:
            raise UserError(
                f"output {self.path} already holds a finished {self.layout.kind}; pass "
                "--overwrite to replace it"
            )
        for stale in (STAGING_DIR, CHECKPOINT_DIR) if clear_staging else (CHECKPOINT_DIR,):
            if self.exists(stale):
                log.info("removing %s left by an unfinished run", self.child(stale))
                self.delete(stale)

    def child_dir(self, name: str) -> OutputDir:
        """A directory inside this one, with the same layout (for listing it)."""
        return OutputDir(self._spark, self.child(name), self.layout)

    def staging(self, run_id: str) -> OutputDir:
        """The directory a run writes into before :meth:`commit`."""
        return OutputDir(self._spark, self.child(f"{STAGING_DIR}/{run_id}"), self.layout)

    def commit(
        self,
        staged: OutputDir,
        manifest: dict[str, Any] | None,
        on_cleared: Callable[[], None] | None = None,
        required: tuple[str, ...] = (),
    ) -> None:
        """Replace OUTPUT's contents by the staged run: ``_SUCCESS`` goes first and comes back
        last, so a reader (or a rerun) never takes a half-replaced OUTPUT for a finished one.
        Under :meth:`locked`, a lease broken meanwhile stops it before anything changes, and
        so does a ``required`` staged table this process cannot see (Spark wrote it where
        this process does not look: a Spark Connect server's own disk, another working
        directory), a :class:`UserError` rather than a finished OUTPUT without it."""
        if self.lease is not None:
            self.lease.check()
        missing = [name for name in required if not staged.exists(name)]
        if missing:
            raise UserError(
                f"the run's {', '.join(m + '/' for m in missing)} written by Spark under "
                f"{staged.path} cannot be seen from this process; OUTPUT was not changed. Over "
                "Spark Connect, give an OUTPUT that the client and the server both see at the "
                "same path (an absolute path on a shared file system, or an object store)"
            )
        if self.exists(SUCCESS_MARKER):
            self.delete(SUCCESS_MARKER)
        for name in (*self.layout.committed, self.layout.manifest, *self.layout.extra):
            if self.exists(name):
                self.delete(name)
        for name in self.entries():  # the previous dataset's files
            if self.layout.is_data_file(name):
                self.delete(name)
        if on_cleared is not None:  # the previous entries are gone, the new ones not yet in
            on_cleared()
        for name in self.layout.committed:
            if staged.exists(name):
                self.storage.rename(staged.child(name), self.child(name))
        data_dir = self.layout.data_dir
        if data_dir is not None and staged.exists(data_dir):
            for name in staged.child_dir(data_dir).entries():
                if self.layout.is_data_file(name):  # not Spark's own _SUCCESS
                    self.storage.rename(staged.child(f"{data_dir}/{name}"), self.child(name))
        if manifest is not None:
            self.write_json(self.layout.manifest, manifest)
        self.mark_success()
        self.delete(STAGING_DIR)

    def finished_manifest(self) -> dict[str, Any] | None:
        """The ``manifest.json`` of a finished run in OUTPUT (``{}`` if it has none), else None."""
        if not self.exists(SUCCESS_MARKER):
            return None
        name = self.layout.manifest
        return self.read_json(name) if self.exists(name) else {}

    def read_json(self, name: str) -> dict[str, Any]:
        """A JSON object written by :meth:`write_json` (``{}`` when the file is missing)."""
        text = self.storage.read_text(self.child(name))
        return {} if text is None else dict(json.loads(text))

    def write_text(self, name: str, text: str) -> None:
        self.storage.write_text(self.child(name), text)

    def file_listing(self, paths: list[str]) -> list[dict[str, Any]]:
        """Size and modification time of each path (for manifests)."""
        out = []
        for path in paths:
            status = storage_for(self._spark, path).status(path)
            if status is None:
                raise UserError(f"input file {path} disappeared during the run")
            out.append({"path": path, "bytes": status.size, "mtime": status.mtime_ms})
        return out

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        self.write_text(name, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")

    def mark_success(self) -> None:
        self.write_text(SUCCESS_MARKER, "")
