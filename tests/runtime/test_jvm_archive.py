"""The JVM class archive: where it lives and when sessions map it (building one and mapping it:
tests/bench/test_jvm_archive.py)."""

from __future__ import annotations

import json
import os

import pyspark

from neardup_spark.runtime import jvm_archive


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


def install_pyspark(monkeypatch, root) -> None:
    """Point ``pyspark`` at a fake install under ``root`` (its jars in ``root/jars``)."""
    monkeypatch.setattr(pyspark, "__file__", str(root / "__init__.py"))


def test_the_key_changes_with_spark_jars(monkeypatch, tmp_path):
    jars = tmp_path / "venv" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"1")
    install_pyspark(monkeypatch, tmp_path / "venv")
    before = jvm_archive.archive_key()
    (jars / "spark-core.jar").write_bytes(b"12")
    assert jvm_archive.archive_key() != before
    # reinstalled at the same path, same size, another time: the JVM refuses the old archive
    # (it checks each jar's time), so the key must change too
    same_size = jvm_archive.archive_key()
    stat = (jars / "spark-core.jar").stat()
    os.utime(jars / "spark-core.jar", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert jvm_archive.archive_key() != same_size
    elsewhere = tmp_path / "other-venv" / "jars"  # the same jars in another install
    elsewhere.mkdir(parents=True)
    (elsewhere / "spark-core.jar").write_bytes(b"12")
    changed = jvm_archive.archive_key()
    install_pyspark(monkeypatch, tmp_path / "other-venv")
    assert jvm_archive.archive_key() != changed


def test_an_archive_is_stale_once_its_install_is_gone_or_changed(tmp_path):
    java = tmp_path / "java"
    java.write_bytes(b"java")
    jars = tmp_path / "venv" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"1")
    key = jvm_archive.archive_key(java, jars)
    archive = tmp_path / f"jvm-classes-{key}.jsa"
    archive.write_bytes(b"archive")
    assert not jvm_archive.is_stale(archive)  # no record: not judged
    record = {"java": str(java), "jars": str(jars)}
    jvm_archive.source_file(archive).write_text(json.dumps(record))
    assert not jvm_archive.is_stale(archive)  # its install, unchanged
    (jars / "spark-core.jar").write_bytes(b"22")
    assert jvm_archive.is_stale(archive)  # Spark reinstalled
    (jars / "spark-core.jar").unlink()
    jars.rmdir()
    assert jvm_archive.is_stale(archive)  # the venv deleted
    jvm_archive.source_file(archive).write_text("{not json")
    assert not jvm_archive.is_stale(archive)
