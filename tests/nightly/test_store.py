"""The index directory: what is refused before any work (a format this version does not read,
a directory that is not an index), without Spark."""

from __future__ import annotations

import json

import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.nightly.store import FORMAT, FORMAT_VERSION, read_manifest


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
