"""The job deletes or replaces only what it can prove it wrote (OUTPUT's ownership record),
without Spark (local paths): a user's files under every name the job uses, before a run and
after a killed one, are refused by name and left as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.output import DEDUPE_LAYOUT, OutputDir, write_beside_run
from neardup_spark.io.ownership import (
    OWNERSHIP_FILE,
    Ownership,
    directory_tree,
    read_ownership,
    unproven_entries,
)

# A user's file under each name a dedupe run writes or removes (clusters/, pairs/, ...).
USER_FILES = [
    "report.json",
    "report.html",
    "manifest.json",
    "_SUCCESS",
    "clusters/my-clusters.csv",
    "pairs/notes.txt",
    "deduplicated/my-part.parquet",
    "deduplicated/part-00000-mine.parquet",
    "changed_clusters/x.parquet",
    "_staging/notes.txt",
    "_staging/abc-def/run.json",
    "_checkpoints/state",
    OWNERSHIP_FILE,
]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def place(root: Path, rel: str, text: str = "the user's own\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def finished_run(root: Path, run_id: str = "run0") -> OutputDir:
    """OUTPUT after a finished run (prepare, staging, commit: as a run does)."""
    out = OutputDir(None, str(root))  # type: ignore[arg-type]
    out.prepare(overwrite=True)
    staged = out.claim_staging(run_id)
    for name in ("clusters", "pairs", "deduplicated"):
        place(root / "_staging" / run_id / name, "part-00000.parquet", run_id)
        place(root / "_staging" / run_id / name, "_SUCCESS", "")
    staged.write_json("report.json", {"run": run_id})
    out.commit(staged, {"run_id": run_id})
    return out


@pytest.mark.parametrize("rel", USER_FILES)
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_users_file_under_a_job_name_is_refused_by_name_and_kept(tmp_path, rel, overwrite):
    root = tmp_path / "out"
    place(root, rel)
    before = snapshot(root)
    with pytest.raises(UserError, match=r"did not write|not written by this job") as refused:
        OutputDir(None, str(root)).prepare(overwrite=overwrite)  # type: ignore[arg-type]
    assert rel.split("/")[0] in str(refused.value)
    assert snapshot(root) == before


@pytest.mark.parametrize("rel", [f for f in USER_FILES if f != OWNERSHIP_FILE])
def test_a_users_file_put_into_a_killed_runs_output_is_refused_and_kept(tmp_path, rel):
    """A run killed with its outputs staged leaves OUTPUT to the next run, but a file the user
    put there since is not the job's: the next run, with --overwrite too, names it. (The killed
    run's staging directory, ``_staging/RUN_ID``, is the job's scratch space, whole.)"""
    root = tmp_path / "out"
    killed = OutputDir(None, str(root))  # type: ignore[arg-type]
    killed.prepare(overwrite=False)
    staged = killed.claim_staging("abc-def")
    staged.write_json("run.json", {"run_id": "abc-def"})
    place(root / "_staging" / "abc-def" / "clusters", "part-00000.parquet", "staged")
    rel = rel.replace("abc-def", "another-run")  # the killed run's staging is the job's
    place(root, rel)
    before = snapshot(root)
    for overwrite in (False, True):
        with pytest.raises(UserError, match="did not write"):
            OutputDir(None, str(root)).prepare(overwrite=overwrite)  # type: ignore[arg-type]
    assert snapshot(root) == before


def test_a_killed_runs_own_entries_are_replaced(tmp_path):
    """What a killed run wrote (its staging, and a commit cut short) is the job's: the next
    run takes the OUTPUT over without --overwrite and commits."""
    root = tmp_path / "out"
    out = finished_run(root, "run0")
    out.prepare(overwrite=True)
    staged = out.claim_staging("run1")
    for name in ("clusters", "pairs", "deduplicated"):
        place(root / "_staging" / "run1" / name, "part-00000.parquet", "run1")

    def killed() -> None:
        raise KeyboardInterrupt  # the commit stops with the old entries gone, the new not in

    with pytest.raises(KeyboardInterrupt):
        out.commit(staged, {"run_id": "run1"}, on_cleared=killed)
    assert not (root / "_SUCCESS").exists() and not (root / "clusters").exists()
    again = OutputDir(None, str(root))  # type: ignore[arg-type]
    again.prepare(overwrite=False, clear_staging=False)
    staged = again.claim_staging("run1")
    again.commit(staged, {"run_id": "run1"})
    assert (root / "clusters" / "part-00000.parquet").read_text() == "run1"
    assert (root / "_SUCCESS").exists() and not (root / "_staging").exists()
    record = read_ownership(LocalStorage(), str(root))
    assert record is not None and record.dirs == set()
    assert set(directory_tree(LocalStorage(), str(root))[0]) == record.files | {OWNERSHIP_FILE}


def test_overwrite_replaces_a_finished_run_but_not_a_file_put_into_it(tmp_path):
    root = tmp_path / "out"
    finished_run(root, "run0")
    with pytest.raises(UserError, match="already holds a finished run"):
        OutputDir(None, str(root)).prepare(overwrite=False)  # type: ignore[arg-type]
    place(root, "clusters/my-notes.txt")
    before = snapshot(root)
    with pytest.raises(UserError, match=r"did not write: clusters/my-notes\.txt"):
        OutputDir(None, str(root)).prepare(overwrite=True)  # type: ignore[arg-type]
    assert snapshot(root) == before
    (root / "clusters" / "my-notes.txt").unlink()
    finished_run(root, "run1")
    assert (root / "clusters" / "part-00000.parquet").read_text() == "run1"


def test_a_file_put_there_during_the_run_stops_the_commit_before_any_change(tmp_path):
    root = tmp_path / "out"
    out = finished_run(root, "run0")
    out.prepare(overwrite=True)
    staged = out.claim_staging("run1")
    place(root / "_staging" / "run1" / "clusters", "part-00000.parquet", "run1")
    place(root, "pairs/added-meanwhile.txt")
    before = snapshot(root)
    with pytest.raises(UserError, match="added-meanwhile"):
        out.commit(staged, {"run_id": "run1"})
    assert snapshot(root) == before


def test_an_output_of_a_version_without_the_record_is_replaced_as_far_as_its_manifest_proves(
    tmp_path,
):
    """A finished OUTPUT written before the record: Spark's files under the committed names and
    the run's own top-level files are the job's; anything else is refused."""
    root = tmp_path / "out"
    for name in ("clusters", "pairs", "deduplicated"):
        place(root / name, "part-00000-abc.snappy.parquet", "old")
        place(root / name, ".part-00000-abc.snappy.parquet.crc", "")
        place(root / name, "_SUCCESS", "")
    place(root, "report.json", "{}")
    place(root, "manifest.json", json.dumps({"run_id": "old"}))
    place(root, "_SUCCESS", "")
    place(root, "deduplicated/mine.csv")
    with pytest.raises(UserError, match=r"deduplicated/mine\.csv"):
        OutputDir(None, str(root)).prepare(overwrite=True)  # type: ignore[arg-type]
    (root / "deduplicated" / "mine.csv").unlink()
    finished_run(root, "run1")
    assert snapshot(root)["clusters/part-00000.parquet"] == b"run1"
    assert "clusters/part-00000-abc.snappy.parquet" not in snapshot(root)


def test_report_html_replaces_only_the_jobs_own(tmp_path):
    root = tmp_path / "out"
    finished_run(root)
    storage = LocalStorage()
    write_beside_run(storage, str(root), "report.html", b"first")
    write_beside_run(storage, str(root), "report.html", b"second")  # its own: replaced
    assert (root / "report.html").read_bytes() == b"second"
    (root / "report.html").unlink()
    place(root, "report.html", "the user's")
    record = read_ownership(storage, str(root))
    assert record is not None
    record.files.discard("report.html")
    (root / OWNERSHIP_FILE).write_text(record.to_json())
    with pytest.raises(UserError, match="not written by this job"):
        write_beside_run(storage, str(root), "report.html", b"third")
    assert (root / "report.html").read_text() == "the user's"


def test_unproven_entries_name_a_foreign_directory_once_and_checksums_go_with_their_file():
    storage = LocalStorage()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel in ("a/b/c.txt", "a/d.txt", "ours/part-0", "ours/.part-0.crc", "ours/.x.crc"):
            place(root, rel)
        (root / "empty").mkdir()
        record = Ownership("run", files={"ours/part-0"})
        assert unproven_entries(storage, str(root), record) == ["a/", "empty/", "ours/.x.crc"]
        assert unproven_entries(storage, str(root), record, within=["ours"]) == ["ours/.x.crc"]


def test_a_file_named_as_the_record_that_is_not_the_jobs_proves_nothing(tmp_path):
    place(tmp_path, OWNERSHIP_FILE, json.dumps({"files": ["x"], "dirs": []}))
    assert read_ownership(LocalStorage(), str(tmp_path)) is None
    assert DEDUPE_LAYOUT.kind == "run"
