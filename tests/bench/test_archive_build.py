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

from neardup_spark.bench import archive_build as builder
from neardup_spark.runtime import jvm_archive
from tests.conftest import QUICK_JIT

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
    """The dumping JVM dies half-way through its archive, or exits 0 leaving an empty one: no
    archive, and the partial file it wrote is gone (a truncated archive crashes the JVM that
    maps it)."""
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(tmp_path / "classes.jsa"))
    partials: list[Path] = []

    def dump_then(exit_code: int, content: bytes):
        def run(command, **kwargs):  # the build's child, as bench/archive_build.py starts it
            partial = Path(command[command.index("--dump") + 1])
            partial.write_bytes(content)
            partials.append(partial)
            if exit_code:
                raise subprocess.CalledProcessError(exit_code, command)
            return subprocess.CompletedProcess(command, exit_code)

        return run

    for exit_code, content in ((134, b"half an archive"), (0, b"")):
        monkeypatch.setattr(subprocess, "run", dump_then(exit_code, content))
        assert builder.ensure_archive() is None
        assert "no JVM class archive" in caplog.text
        assert partials[-1].parent == tmp_path  # it did write beside the archive
        assert not list(tmp_path.iterdir())  # no partial archive left behind
    assert len(partials) == 2


@pytest.mark.slow
def test_a_built_archive_is_mapped_by_a_real_local_run(built_jvm_archive, tmp_path):
    """The archive ``neardup jvm-archive`` built (the suite's, tests/conftest.py), named by
    NEARDUP_SPARK_JVM_ARCHIVE alone: the CLI's local session adds the options that map it
    (runtime/session.py), and its JVM loads Spark's classes from it. The JVM's own class-load
    log says so ("shared objects file (top)": the dynamic archive's layer; without it, classes
    come from jars or the JDK's base archive), and the run's result is right."""
    archive = built_jvm_archive
    assert archive.is_file() and not list(archive.parent.glob("*.part"))
    base = " ".join(f"w{i}" for i in range(40))
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": [base, base, "other"]}), corpus)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        jvm_archive.ARCHIVE_ENV: str(archive),
        # not the suite's own mapping of make setup's archive (tests/conftest.py): the product's
        "SPARK_SUBMIT_OPTS": QUICK_JIT,
        # every JVM of the run (spark-submit's launcher, then the driver) logs where each class
        # came from, to a file of its own
        "JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={tmp_path}/classes-%p.log",
    }
    out = tmp_path / "out"
    command = ["dedupe", str(corpus), str(out), "--master", "local[2]"]
    run = subprocess.run(
        [sys.executable, "-m", "neardup_spark", *command],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["removed"] == 1
    logs = [log.read_text(errors="replace") for log in tmp_path.glob("classes-*.log")]
    from_archive = max(log.count("source: shared objects file (top)") for log in logs)
    assert from_archive > 1000, f"{len(logs)} JVM logs, {from_archive} classes from the archive"


def test_building_removes_only_the_archives_whose_install_is_gone(tmp_path):
    """Each archive is ~170 MB: a clean clone's venv deleted, or Spark reinstalled, leaves one
    behind. Building the current one removes those, and keeps another install's current archive,
    one without a record (an older version's) and itself."""
    java = tmp_path / "java"
    java.write_bytes(b"java")

    def archive_for(name: str, record: bool = True) -> Path:
        jars = tmp_path / name / "jars"
        jars.mkdir(parents=True)
        (jars / "spark-core.jar").write_bytes(name.encode())
        archive = tmp_path / "cache" / f"jvm-classes-{jvm_archive.archive_key(java, jars)}.jsa"
        archive.parent.mkdir(exist_ok=True)
        archive.write_bytes(b"archive")
        if record:
            source = {"java": str(java), "jars": str(jars)}
            jvm_archive.source_file(archive).write_text(json.dumps(source))
        return archive

    current, other, unrecorded = (
        archive_for("current"),
        archive_for("other"),
        archive_for("old", False),
    )
    deleted, changed = archive_for("deleted"), archive_for("changed")
    for jar in (tmp_path / "deleted" / "jars").iterdir():
        jar.unlink()
    (tmp_path / "deleted" / "jars").rmdir()
    (tmp_path / "changed" / "jars" / "spark-core.jar").write_bytes(b"reinstalled")
    (tmp_path / "current" / "jars" / "spark-core.jar").write_bytes(b"changed too, but kept")

    removed = builder.remove_stale_archives(tmp_path / "cache", keep=current)
    assert sorted(removed) == sorted([deleted, changed])
    left = sorted(path.name for path in (tmp_path / "cache").iterdir())
    kept = [current, other, unrecorded]
    recorded = [jvm_archive.source_file(current).name, jvm_archive.source_file(other).name]
    assert left == sorted([path.name for path in kept] + recorded)


# Stands in for the kernels' warm-up: "compiles" (fills the cache) when numba's cache directory
# is empty, and prints its seconds as the last line, as warm_kernels' caller does.
FAKE_KERNELS = """
import os, pathlib
cache = pathlib.Path(os.environ["NUMBA_CACHE_DIR"])
warm = cache.is_dir() and any(cache.iterdir())
cache.mkdir(parents=True, exist_ok=True)
(cache / "kernel.nbc").write_text("x")
print("loading")
print(0.5 if warm else 7.25)
"""


def test_kernel_compile_seconds_times_an_empty_cache_then_a_warm_one(monkeypatch, tmp_path):
    monkeypatch.setattr(builder, "_KERNELS", FAKE_KERNELS)
    assert builder.kernel_compile_seconds(tmp_path) == {"compile": 7.25, "cached": 0.5}
    assert not (tmp_path / "numba-cache-cold").exists()  # its own cache, removed after
    monkeypatch.setattr(builder, "_KERNELS", "print('no number')")
    assert builder.kernel_compile_seconds(tmp_path) is None
