"""The JVM class archive: where it lives, when sessions map it, and a real one built and mapped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.runtime import jvm_archive
from neardup_spark.runtime.session import LOCAL_DEFAULTS

REPO = Path(__file__).resolve().parents[2]


def test_archive_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(tmp_path / "a.jsa"))
    assert jvm_archive.archive_path() == tmp_path / "a.jsa"
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, "off")
    assert jvm_archive.archive_path() is None
    assert jvm_archive.java_options() == ""
    monkeypatch.delenv(jvm_archive.ARCHIVE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == tmp_path / "cache" / "neardup-spark"
    assert jvm_archive.archive_key() in path.name


def test_sessions_map_the_archive_only_once_it_exists(tmp_path):
    archive = tmp_path / "classes.jsa"
    assert jvm_archive.java_options(archive) == ""
    archive.write_bytes(b"x")
    assert f"-XX:SharedArchiveFile={archive}" in jvm_archive.java_options(archive)


def test_the_key_changes_with_spark_jars(monkeypatch, tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"1")
    monkeypatch.setattr(jvm_archive, "_spark_jars", lambda: jars)
    before = jvm_archive.archive_key()
    (jars / "spark-core.jar").write_bytes(b"12")
    assert jvm_archive.archive_key() != before
    elsewhere = tmp_path / "other-venv" / "jars"  # the same jars in another install
    elsewhere.mkdir(parents=True)
    (elsewhere / "spark-core.jar").write_bytes(b"12")
    changed = jvm_archive.archive_key()
    monkeypatch.setattr(jvm_archive, "_spark_jars", lambda: elsewhere)
    assert jvm_archive.archive_key() != changed


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
