"""The index directory: what is refused before any work (a format this version does not read,
a directory that is not an index), without Spark."""

from __future__ import annotations

import json
import shutil

import pytest

from neardup_spark.errors import IndexDamaged, UserError
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.lease import Holder, LeaseLost, acquire
from neardup_spark.io.ownership import OWNERSHIP_FILE, Ownership, write_ownership
from neardup_spark.nightly.layout import COMMITS_DIR
from neardup_spark.nightly.store import (
    FORMAT,
    FORMAT_VERSION,
    Index,
    IndexCommitConflict,
    read_manifest,
)


def test_an_index_of_format_version_1_is_refused_with_how_to_rebuild(tmp_path):
    (tmp_path / "v000003-abc").mkdir()
    manifest = {"format": FORMAT, "format_version": 1, "name": "v000003-abc"}
    (tmp_path / "v000003-abc" / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "CURRENT").write_text("v000003-abc\n")
    with pytest.raises(UserError) as refused:
        read_manifest(LocalStorage(), str(tmp_path))
    message = str(refused.value)
    assert "format version 1" in message and f"reads version {FORMAT_VERSION}" in message
    assert "Rebuild the index" in message and "nothing was changed" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CURRENT", "v000003-abc"]


def test_a_directory_that_is_not_an_index_is_refused(tmp_path):
    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(UserError, match="is not a neardup index"):
        read_manifest(LocalStorage(), str(tmp_path))
    assert read_manifest(LocalStorage(), str(tmp_path / "new")) is None  # a new index


def version(number: int, nonce: str, previous: str | None = None) -> dict:
    """A minimal manifest (what commit, roll-forward and garbage collection read)."""
    name = f"v{number:06d}-{nonce}"
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "version": number,
        "name": name,
        "previous": previous,
        "segments": [],
        "batches": [],
    }


def test_a_version_whose_log_entry_exists_is_committed_even_without_current(tmp_path):
    storage, root = LocalStorage(), str(tmp_path)
    # A new index whose first run was killed between its log entry and CURRENT.
    Index(None, root, storage, None).commit(version(1, "aaaa"), run="night1")  # type: ignore[arg-type]
    (tmp_path / "CURRENT").unlink()
    assert read_manifest(storage, root)["name"] == "v000001-aaaa"
    (tmp_path / "CURRENT").write_text("v000001-aaaa\n")
    # The next one killed likewise: CURRENT still names version 1, the log has version 2.
    second = version(2, "bbbb", previous="v000001-aaaa")
    (tmp_path / "v000002-bbbb").mkdir()
    (tmp_path / "v000002-bbbb" / "manifest.json").write_text(json.dumps(second))
    (tmp_path / COMMITS_DIR / "v000002").write_text(json.dumps({"name": "v000002-bbbb"}))
    assert read_manifest(storage, root)["name"] == "v000002-bbbb"
    assert (tmp_path / "CURRENT").read_text() == "v000001-aaaa\n"  # reading changes nothing


def test_an_index_without_a_commit_log_reads_as_before(tmp_path):
    (tmp_path / "v000003-abc").mkdir()
    (tmp_path / "v000003-abc" / "manifest.json").write_text(json.dumps(version(3, "abc")))
    (tmp_path / "CURRENT").write_text("v000003-abc\n")
    assert read_manifest(LocalStorage(), str(tmp_path))["version"] == 3


def test_two_commits_of_one_version_one_wins_the_other_changes_nothing(tmp_path):
    storage, root = LocalStorage(), str(tmp_path)
    base = version(1, "aaaa")
    Index(None, root, storage, None).commit(base, run="night1")  # type: ignore[arg-type]
    first = Index(None, root, storage, base)  # type: ignore[arg-type]
    second = Index(None, root, storage, base)  # type: ignore[arg-type]
    first.commit(version(2, "bbbb", previous=base["name"]), run="night2")
    with pytest.raises(IndexCommitConflict) as conflict:
        second.commit(version(2, "cccc", previous=base["name"]), run="night3")
    message = str(conflict.value)
    assert "another run (night2) committed version 2" in message and "Rerun it" in message
    assert (tmp_path / "CURRENT").read_text() == "v000002-bbbb\n"
    assert read_manifest(storage, root)["name"] == "v000002-bbbb"
    # The loser's manifest is debris the next collection deletes; the log stays.
    first.collect_garbage(keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "CURRENT",
        COMMITS_DIR,
        OWNERSHIP_FILE,
        "v000001-aaaa",
        "v000002-bbbb",
    ]
    assert sorted(p.name for p in (tmp_path / COMMITS_DIR).iterdir()) == ["v000001", "v000002"]


def five_committed_versions(tmp_path) -> Index:
    """An index at ``tmp_path`` that committed versions 1 to 5, one night each."""
    index = Index(None, str(tmp_path), LocalStorage(), None)  # type: ignore[arg-type]
    previous = None
    for number in range(1, 6):
        manifest = version(number, f"{number:04x}", previous=previous)
        index.commit(manifest, run=f"night{number}")
        previous = manifest["name"]
    return index


def test_old_log_entries_go_with_their_versions(tmp_path):
    index = five_committed_versions(tmp_path)
    (tmp_path / "_lock").write_text("{}")  # a writer's lease is part of the index
    index.collect_garbage(keep=2)
    assert sorted(p.name for p in (tmp_path / COMMITS_DIR).iterdir()) == ["v000004", "v000005"]
    assert sorted(p.name for p in tmp_path.glob("v*")) == ["v000004-0004", "v000005-0005"]


def test_a_lost_current_after_old_log_entries_went_still_finds_the_committed_version(tmp_path):
    """CURRENT gone (a replace that deletes before it renames, killed between the two) once the
    first log entries went with their versions: the log's newest entry is the committed
    version, not "no index yet" (whose next commit's clean-up would delete every version)."""
    root = str(tmp_path)
    index = five_committed_versions(tmp_path)
    index.collect_garbage(keep=2)
    (tmp_path / "CURRENT").unlink()
    assert read_manifest(LocalStorage(), root)["name"] == "v000005-0005"
    opened = Index.open(None, root)  # type: ignore[arg-type]
    assert opened.version == 5
    assert (tmp_path / "CURRENT").read_text() == "v000005-0005\n"  # brought back


def test_versions_without_current_or_log_are_refused_not_taken_for_a_new_index(tmp_path):
    """An index from before the commit log whose CURRENT is gone: nothing names its committed
    version, and a new index would delete them all as debris. A first version alone is what a
    first run killed before its commit leaves: a new index, which collects it."""
    for number in (1, 2, 3):
        name = f"v{number:06d}-abc{number}"
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps(version(number, f"abc{number}")))
    with pytest.raises(IndexDamaged, match="versions up to v000003 exist") as refused:
        read_manifest(LocalStorage(), str(tmp_path))
    assert "nothing was changed" in str(refused.value)
    for number in (2, 3):
        shutil.rmtree(tmp_path / f"v{number:06d}-abc{number}")
    # Unless the job's record says a run wrote it, it is not the job's to collect.
    with pytest.raises(UserError, match=r"is not a neardup index \(it holds v000001-abc1/\)"):
        read_manifest(LocalStorage(), str(tmp_path))
    record = Ownership("index", dirs={"v000001-abc1"})
    write_ownership(LocalStorage(), str(tmp_path), record)
    assert read_manifest(LocalStorage(), str(tmp_path)) is None


def test_garbage_collection_stops_once_the_lease_was_broken(tmp_path):
    """A run that stalled past the stale limit lost its lease to another run, whose fresh
    segment its own manifest does not know: its clean-up stops (LeaseLost) before deleting."""
    storage, root = LocalStorage(), str(tmp_path)
    Index(None, root, storage, None).commit(version(1, "aaaa"), run="night1")  # type: ignore[arg-type]
    stalled = Index(None, root, storage, version(1, "aaaa"))  # type: ignore[arg-type]
    stalled.lease = acquire(storage, root, "nightly run", timeout=5)
    try:
        (tmp_path / "_lock").write_text(Holder.this_process("another night").to_text())
        fresh = tmp_path / "segments" / "s000002-other"
        fresh.mkdir(parents=True)
        with pytest.raises(LeaseLost):
            stalled.collect_garbage()
        assert fresh.is_dir()
    finally:
        stalled.lease.release()


# A user's file under each name the index uses.
USER_ENTRIES = ["segments/notes.txt", "batches/readme.md", "_commits/notes", "v000009-dead/x"]


@pytest.mark.parametrize("rel", [*USER_ENTRIES, "CURRENT", OWNERSHIP_FILE])
def test_a_directory_with_a_users_file_under_an_index_name_is_not_taken_for_a_new_index(
    tmp_path, rel
):
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("the user's own\n")
    with pytest.raises(UserError, match=r"is not a neardup index|not written by this job"):
        read_manifest(LocalStorage(), str(tmp_path))
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [path]


def test_the_clean_up_deletes_what_runs_wrote_and_nothing_else(tmp_path):
    """Old versions and a killed run's claimed segment go; a user's files under the index's
    names, a version-like directory the job did not write among them, stay."""
    index = five_committed_versions(tmp_path)
    for rel in USER_ENTRIES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("the user's own\n")
    index.claim("segments/s000006-dead", "batches/b000006-run-dead", "v000006-dead")
    (tmp_path / "segments" / "s000006-dead" / "docs").mkdir(parents=True)  # a killed night's
    (tmp_path / "batches" / "b000006-run-dead").mkdir(parents=True)
    index.collect_garbage(keep=2)
    assert sorted(p.name for p in tmp_path.glob("v*")) == [
        "v000004-0004",
        "v000005-0005",
        "v000009-dead",
    ]
    for rel in USER_ENTRIES:
        assert (tmp_path / rel).read_text() == "the user's own\n", rel
    assert not (tmp_path / "segments" / "s000006-dead").exists()
    assert not (tmp_path / "batches" / "b000006-run-dead").exists()
    assert sorted(p.name for p in (tmp_path / COMMITS_DIR).iterdir()) == [
        "notes",
        "v000004",
        "v000005",
    ]


def test_an_index_written_before_the_record_keeps_what_its_versions_do_not_name(tmp_path):
    """The record is adopted from the versions' manifests at the first clean-up: what they
    name is collected as it ages, unnamed debris stays."""
    index = five_committed_versions(tmp_path)
    (tmp_path / OWNERSHIP_FILE).unlink()
    (tmp_path / "segments" / "s000003-debris").mkdir(parents=True)
    index.collect_garbage(keep=2)
    assert sorted(p.name for p in tmp_path.glob("v*")) == ["v000004-0004", "v000005-0005"]
    assert (tmp_path / "segments" / "s000003-debris").is_dir()
    assert (tmp_path / OWNERSHIP_FILE).exists()
