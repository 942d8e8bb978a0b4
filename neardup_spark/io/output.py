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
from neardup_spark.io.filesystem import Storage, join
from neardup_spark.io.lease import LOCK_FILE, Lease, hold_lease
from neardup_spark.io.ownership import (
    OWNERSHIP_FILE,
    Ownership,
    claimed_before,
    describe,
    directory_tree,
    read_ownership,
    unproven_entries,
    write_ownership,
)
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
    # The JSON file by which a finished run of a version without the ownership record is
    # known (default: the manifest).
    legacy_proof: str | None = None

    def is_data_file(self, name: str) -> bool:
        """A file of the dataset at OUTPUT (``part-*``) in a layout with a ``data_dir``."""
        return self.data_dir is not None and name.startswith(
            (DATA_FILE_PREFIX, "." + DATA_FILE_PREFIX)  # Hadoop's checksum files too
        )

    @property
    def top_names(self) -> tuple[str, ...]:
        """What a run of ours may leave at OUTPUT's top level (besides data files)."""
        return (
            *self.committed,
            *self.extra,
            SUCCESS_MARKER,
            CHECKPOINT_DIR,
            STAGING_DIR,
            LOCK_FILE,
            self.manifest,
            OWNERSHIP_FILE,
        )

    def legacy_ownership(self, files: list[str]) -> Ownership:
        """What a finished OUTPUT written before the ownership record proves the job wrote:
        Spark's files (``part-*``, ``_SUCCESS``, their checksums) under the names this layout
        commits, and its own files at the top."""
        spark_file = (DATA_FILE_PREFIX, "." + DATA_FILE_PREFIX, SUCCESS_MARKER, "._SUCCESS")
        ours = set()
        for rel in files:
            head, _, name = rel.rpartition("/")
            top = rel.split("/", 1)[0]
            own_file = name in (self.manifest, SUCCESS_MARKER) or "." in name  # report.json
            at_top = (own_file and name in self.top_names) or self.is_data_file(name)
            below = top in (*self.committed, *self.extra) and name.startswith(spark_file)
            if (at_top and not head) or (below and head):
                ours.add(rel)
        return Ownership(self.kind, None, ours, set())


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
        # What the job wrote here (:meth:`prepare` claims OUTPUT, :meth:`commit` records).
        self.ownership: Ownership | None = None

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
        """Check OUTPUT may be written and claim it: refuse anything there the job cannot
        prove it wrote (:mod:`~neardup_spark.io.ownership`: a user's files under any name,
        the job's names included), refuse a finished run unless ``overwrite``, write the
        ownership record, and clear a stale staging area (unless ``clear_staging`` is False: a
        resumable run decides what to keep of it).

        Nothing of a previous run is deleted here: new outputs are staged and replace the old
        ones only at :meth:`commit`, so a run killed at any point leaves them as they were.
        """
        self._refuse_a_file()
        ownership = self._ownership()
        unproven = unproven_entries(self.storage, self.path, ownership)
        if unproven:
            raise UserError(
                f"output {self.path} holds files this job did not write: "
                f"{describe(unproven)}. Nothing was changed: the job deletes or replaces only "
                "what a run of it wrote (--overwrite too); move them away or choose an empty "
                "or new directory"
            )
        if self.exists(SUCCESS_MARKER) and not overwrite:
            raise UserError(
                f"output {self.path} already holds a finished {self.layout.kind}; pass "
                "--overwrite to replace it"
            )
        self.ownership = ownership
        write_ownership(self.storage, self.path, ownership)
        for stale in (STAGING_DIR, CHECKPOINT_DIR) if clear_staging else (CHECKPOINT_DIR,):
            if self.exists(stale):
                log.info("removing %s left by an unfinished run", self.child(stale))
                self.delete(stale)

    def _ownership(self) -> Ownership:
        """OUTPUT's ownership record; for a finished OUTPUT of a version without one, what
        its layout proves; else an empty record (a file named as the record that is not
        the job's is then an entry the job cannot prove it wrote)."""
        found = claimed_before(self.storage, self.path)
        if found is not None:
            return found
        if self._finished_by_an_earlier_version():
            return self.layout.legacy_ownership(directory_tree(self.storage, self.path)[0])
        return Ownership(self.layout.kind)

    def _finished_by_an_earlier_version(self) -> bool:
        """``_SUCCESS`` beside the run's manifest (a JSON object naming its run id or the
        version that wrote it): a finished run of a version without the ownership record."""
        if not self.exists(SUCCESS_MARKER):
            return False
        try:
            proof = self.read_json(self.layout.legacy_proof or self.layout.manifest)
        except (ValueError, TypeError):
            return False
        return "run_id" in proof or "neardup_spark_version" in proof

    def claim_staging(self, run_id: str) -> OutputDir:
        """The directory the run ``run_id`` writes into before :meth:`commit`, recorded as
        the job's before anything goes there."""
        ownership = self._claimed()
        ownership.run_id = run_id
        ownership.dirs.add(f"{STAGING_DIR}/{run_id}")
        write_ownership(self.storage, self.path, ownership)
        return self.staging(run_id)

    def drop_staging(self, run_id: str) -> None:
        """Delete the staging directory of the unfinished run ``run_id`` (the job's)."""
        ownership = self._claimed()
        rel = f"{STAGING_DIR}/{run_id}"
        if not ownership.proves_dir(rel):
            raise UserError(f"{self.child(rel)} was not written by this job; it is left in place")
        self.delete(rel)
        ownership.dirs.discard(rel)
        write_ownership(self.storage, self.path, ownership)

    def _claimed(self) -> Ownership:
        """The record :meth:`prepare` wrote (read back for an OutputDir made afresh)."""
        if self.ownership is None:
            self.ownership = read_ownership(self.storage, self.path)
        if self.ownership is None:
            raise UserError(f"output {self.path} was not prepared by this run")
        return self.ownership

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
        ownership = self._claimed()
        replaced = (*self.layout.committed, self.layout.manifest, *self.layout.extra)
        unproven = unproven_entries(self.storage, self.path, ownership)
        if unproven:  # put there while the run ran
            raise UserError(
                f"output {self.path} holds files this job did not write: "
                f"{describe(unproven)}; OUTPUT was not changed. Move them away and run again"
            )
        placed = self._placed_files(staged)
        top = {self.layout.manifest, SUCCESS_MARKER} if manifest is not None else {SUCCESS_MARKER}
        ownership.files |= placed | top  # listed before they exist: a kill leaves them covered
        write_ownership(self.storage, self.path, ownership)
        if self.exists(SUCCESS_MARKER):
            self.delete(SUCCESS_MARKER)
        for name in replaced:
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
        ownership.files = placed | top
        ownership.dirs = set()
        write_ownership(self.storage, self.path, ownership)

    def _placed_files(self, staged: OutputDir) -> set[str]:
        """The files the commit moves from ``staged`` into OUTPUT, as OUTPUT's paths."""
        files = directory_tree(staged.storage, staged.path)[0]
        placed = {f for f in files if f.split("/", 1)[0] in self.layout.committed}
        data_dir = self.layout.data_dir
        if data_dir is not None:
            for rel in files:
                head, _, name = rel.rpartition("/")
                if head == data_dir and self.layout.is_data_file(name):
                    placed.add(name)
        return placed

    def record_written(self, name: str) -> None:
        """Record the file ``name`` at OUTPUT's top level as the job's (report.html, written
        after the commit)."""
        ownership = self._claimed()
        if name not in ownership.files:
            ownership.files.add(name)
            write_ownership(self.storage, self.path, ownership)

    def finished_manifest(self) -> dict[str, Any] | None:
        """The ``manifest.json`` of a finished run of the job in OUTPUT (``{}`` if it has
        none), else None: also where ``_SUCCESS`` or the manifest is not the job's."""
        if not self.exists(SUCCESS_MARKER):
            return None
        name = self.layout.manifest
        try:
            record = claimed_before(self.storage, self.path)
        except UserError:
            return None
        if record is None and not self._finished_by_an_earlier_version():
            return None
        if record is not None and not (record.proves(SUCCESS_MARKER) and record.proves(name)):
            return None if self.exists(name) or not record.proves(SUCCESS_MARKER) else {}
        try:
            return self.read_json(name) if self.exists(name) else {}
        except (ValueError, TypeError):
            return None

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


def write_beside_run(storage: Storage, output: str, name: str, data: bytes) -> None:
    """Write ``OUTPUT/name`` beside a finished run (``report.html``), replacing only a file the
    job wrote there (:class:`UserError` otherwise), and record it as the job's. Without an
    ownership record, only a finished run's own file (an earlier version's run) is replaced."""
    path = join(output, name)
    ownership = read_ownership(storage, output)
    if storage.exists(path):
        mine = (
            ownership.proves(name)
            if ownership is not None
            else storage.exists(join(output, SUCCESS_MARKER))
        )
        if not mine:
            raise UserError(f"{path} was not written by this job; it is left in place")
    storage.write_bytes(path, data)
    if ownership is not None:
        ownership.files.add(name)
        write_ownership(storage, output, ownership)
