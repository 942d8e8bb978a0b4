"""OUTPUT's commit, without Spark (local paths): what it refuses before it changes anything."""

from __future__ import annotations

import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.output import OutputDir


def test_a_commit_whose_staged_tables_cannot_be_seen_changes_nothing(tmp_path):
    """Spark wrote the run's tables where this process does not look (a Spark Connect server's
    own disk, a relative OUTPUT under another working directory): the commit is refused before
    it deletes the previous run's outputs, not a finished OUTPUT without them."""
    out = OutputDir(None, str(tmp_path / "out"))  # type: ignore[arg-type]
    out.prepare(overwrite=False)
    previous = out.claim_staging("run0")
    for name in ("clusters", "pairs", "deduplicated"):
        (tmp_path / "out" / "_staging" / "run0" / name).mkdir(parents=True)
        (tmp_path / "out" / "_staging" / "run0" / name / "part-0.parquet").write_text("previous")
    out.commit(previous, {"run_id": "run0"})
    out.prepare(overwrite=True)
    staged = out.claim_staging("run1")
    staged.write_json("report.json", {"counts": {}})  # this process's own write: visible
    (tmp_path / "out" / "_staging" / "run1" / "pairs").mkdir()
    with pytest.raises(UserError, match=r"clusters/, deduplicated/ written by Spark .* cannot"):
        out.commit(staged, {"run_id": "run1"}, required=("clusters", "pairs", "deduplicated"))
    kept = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*"))
    assert "_SUCCESS" in kept and "clusters/part-0.parquet" in kept  # the previous run, whole
    for name in ("clusters", "deduplicated"):
        (tmp_path / "out" / "_staging" / "run1" / name).mkdir()
    out.commit(staged, {"run_id": "run1"}, required=("clusters", "pairs", "deduplicated"))
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert not (tmp_path / "out" / "clusters" / "part-0.parquet").exists()  # replaced
