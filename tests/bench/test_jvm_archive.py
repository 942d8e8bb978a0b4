"""Building the JVM class archive: ``ensure_archive`` before a benchmark, and a real archive
built by ``neardup jvm-archive`` and mapped by a local run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.bench import jvm_archive as builder
from neardup_spark.runtime import jvm_archive
from neardup_spark.runtime.session import LOCAL_DEFAULTS

REPO = Path(__file__).resolve().parents[2]


def test_ensure_archive_is_off_when_the_archive_is(monkeypatch):
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, "off")
    assert builder.ensure_archive() is None


def test_ensure_archive_reuses_an_existing_one(monkeypatch, tmp_path):
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"x")
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(archive))
    assert builder.ensure_archive() == {"path": str(archive), "built_seconds": None}


def test_a_failed_build_leaves_the_rows_without_one(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(tmp_path / "classes.jsa"))

    def fail(*args, **kwargs):
        raise subprocess.CalledProcessError(1, ["neardup", "jvm-archive"])

    monkeypatch.setattr(subprocess, "run", fail)
    assert builder.ensure_archive() is None
    assert "no JVM class archive" in caplog.text
    assert not list(tmp_path.iterdir())  # no partial archive left behind


@pytest.mark.slow
def test_a_built_archive_is_mapped_by_a_real_local_run(tmp_path):
    """Build the archive (a child dedupe in a dumping JVM), then run the CLI with the JVM told to
    refuse to start unless it maps that archive (-Xshare:on), and check its result."""
    archive = tmp_path / "classes.jsa"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, jvm_archive.ARCHIVE_ENV: str(archive)}

    def neardup(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "neardup_spark", *args]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=600, env=env, cwd=REPO
        )

    built = neardup("jvm-archive")
    assert built.returncode == 0, built.stderr
    assert archive.is_file() and not list(tmp_path.glob("*.part"))

    base = " ".join(f"w{i}" for i in range(40))
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": [base, base, "other"]}), corpus)
    java = f"{LOCAL_DEFAULTS['spark.driver.extraJavaOptions']} {jvm_archive.java_options(archive)}"
    out = tmp_path / "out"
    java_set = f"spark.driver.extraJavaOptions={java} -Xshare:on"
    run = neardup("dedupe", str(corpus), str(out), "--master", "local[2]", "--set", java_set)
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["removed"] == 1
