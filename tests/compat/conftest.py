"""Recording and comparing the compact suite's clusters across Spark versions.

``make test-compat`` runs ``tests/compat`` first with the pinned Spark (``NEARDUP_COMPAT_OUT``:
the clusters are written to ``DIR/clusters.json``), then in a venv per Spark version with
``NEARDUP_COMPAT_REFERENCE`` pointing at that file: each recorded result must equal the pinned
version's. Without either variable (``make test``) the tests check their own invariants only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

OUT_ENV = "NEARDUP_COMPAT_OUT"
REFERENCE_ENV = "NEARDUP_COMPAT_REFERENCE"


class Recorder:
    """Results by name; each one checked against the reference when there is one."""

    def __init__(self, reference: dict[str, Any] | None) -> None:
        self.results: dict[str, Any] = {}
        self.reference = reference

    def check(self, name: str, result: Any) -> None:
        """Record ``result`` (JSON data) and, with a reference, assert it equals the pinned
        Spark's."""
        result = json.loads(json.dumps(result))  # tuples -> lists, as the reference has them
        self.results[name] = result
        if self.reference is not None:
            assert name in self.reference, f"the reference has no {name!r}: rerun it"
            assert result == self.reference[name], f"{name}: differs from the pinned Spark's"


@pytest.fixture(scope="session")
def compat_recorder():
    reference_file = os.environ.get(REFERENCE_ENV)
    reference = json.loads(Path(reference_file).read_text()) if reference_file else None
    recorder = Recorder(reference)
    yield recorder
    out = os.environ.get(OUT_ENV)
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "clusters.json").write_text(json.dumps(recorder.results, sort_keys=True))
