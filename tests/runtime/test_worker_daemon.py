"""The local-mode Python worker daemon drops only archives whose code is installed identically."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from neardup_spark.runtime.worker_daemon import redundant_archives


def _package(root: Path, name: str, version: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "version.py").write_text(f"__version__ = {version!r}\n")


def _zip(path: Path, files: dict[str, str]) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return str(path)


def test_archives_shadowed_by_identical_installs_or_without_python_are_redundant(tmp_path):
    site = tmp_path / "site"
    _package(site, "pkg", "1.0")
    same = _zip(
        tmp_path / "same.zip",
        {"pkg/__init__.py": "", "pkg/version.py": "__version__ = '1.0'\n", "pkg/a.py": ""},
    )
    other = _zip(
        tmp_path / "other.zip",
        {"pkg/__init__.py": "", "pkg/version.py": "__version__ = '2.0'\n"},
    )
    missing = _zip(tmp_path / "missing.zip", {"solo/__init__.py": "x = 1\n"})
    loose = _zip(tmp_path / "loose.zip", {"pkg/__init__.py": "", "helper.py": ""})
    jar = _zip(tmp_path / "core.jar", {"org/apache/X.class": "", "META-INF/MANIFEST.MF": ""})
    path = [same, other, missing, loose, jar, str(site), str(tmp_path / "absent.zip")]
    assert redundant_archives(path) == [same, jar]


def test_a_package_without_version_file_compares_its_init(tmp_path):
    site = tmp_path / "site"
    (site / "lib").mkdir(parents=True)
    (site / "lib" / "__init__.py").write_text("A = 1\n")
    same = _zip(tmp_path / "a.zip", {"lib/__init__.py": "A = 1\n"})
    changed = _zip(tmp_path / "b.zip", {"lib/__init__.py": "A = 2\n"})
    assert redundant_archives([same, changed, str(site)]) == [same]


def test_spark_python_workers_run_without_the_redundant_archives(spark):
    assert spark.conf.get("spark.python.daemon.module") == "neardup_spark.runtime.worker_daemon"

    def worker_path(batches):  # nested: pickled by value, the workers cannot import tests
        for _ in batches:
            pass
        archives = [p for p in sys.path if p.endswith((".zip", ".jar"))]
        import pyspark

        yield pa.RecordBatch.from_pylist([{"archives": archives, "pyspark": pyspark.__file__}])

    schema = "archives array<string>, pyspark string"
    rows = spark.range(4, numPartitions=2).mapInArrow(worker_path, schema).collect()
    for row in rows:
        # Spark put pyspark.zip, the py4j zip and spark-core's jar there; pip installed the same.
        assert not [a for a in row["archives"] if "pyspark" in a], row["archives"]
        assert ".zip" not in row["pyspark"]


def test_spark_python_workers_are_forked_from_a_preloaded_daemon(spark):
    """The workers' parent (the daemon) imported the job's stages before forking them: SciPy's
    graph extension, which only the components stage uses and pyspark never imports, is mapped
    in the daemon's memory. On an AVX-512 CPU their numba builds for 512-bit vectors."""

    def parent_maps(batches):  # nested: pickled by value
        import os

        with open(f"/proc/{os.getppid()}/maps") as maps:
            mapped = "scipy/sparse/csgraph" in maps.read()
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            parent = cmdline.read().replace(b"\0", b" ").decode()
        wide = os.environ.get("NUMBA_CPU_FEATURES", "").endswith("-prefer-256-bit")
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"mapped": mapped, "parent": parent, "wide": wide}])

    rows = (
        spark.range(4, numPartitions=2)
        .mapInArrow(parent_maps, "mapped boolean, parent string, wide boolean")
        .collect()
    )
    for row in rows:
        assert "neardup_spark.runtime.worker_daemon" in row["parent"]
        assert row["mapped"], row["parent"]
        assert row["wide"] == _host_has_avx512()  # the daemon chose the vector width


def test_preload_is_idempotent_and_loads_each_kernel():
    from neardup_spark.kernels import compiled_words, jaccard, minhash, normalize
    from neardup_spark.runtime.worker_daemon import preload

    preload()
    preload()
    for dispatcher in (
        minhash._compiled_minimums,
        jaccard._compiled_pair_scores,
        normalize._ascii_words,
        compiled_words._shingle_hashes,
        compiled_words._word_simhashes,
    ):
        assert dispatcher.signatures, dispatcher


def _host_has_avx512() -> bool:
    import llvmlite.binding as llvm

    return "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")


def test_wide_vectors_are_left_alone_once_numba_is_imported(monkeypatch):
    import numba  # noqa: F401  (imported: too late to change its target)

    from neardup_spark.kernels.cpu_features import prefer_wide_vectors

    monkeypatch.delenv("NUMBA_CPU_FEATURES", raising=False)
    assert prefer_wide_vectors() is False
    assert "NUMBA_CPU_FEATURES" not in __import__("os").environ


@pytest.mark.skipif(
    not _host_has_avx512(),
    reason="no AVX-512 on this CPU: the 512-bit build cannot be made or run here (the test "
    "would compare the 256-bit build, which the other kernel tests cover)",
)
def test_minhash_compiled_for_wide_vectors_equals_numpy_path():
    """In a fresh interpreter, as in the daemon: the 512-bit build gives the same sketches."""
    import subprocess
    import textwrap

    code = textwrap.dedent(
        """
        import os
        from neardup_spark.kernels.cpu_features import prefer_wide_vectors
        wide = prefer_wide_vectors()
        import numpy as np
        from neardup_spark.kernels.minhash import MultiplyShiftFamily, signatures
        rng = np.random.default_rng(5)
        sizes = rng.integers(0, 30, size=50)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        values = rng.integers(0, 2**64 - 1, size=offsets[-1], dtype=np.uint64)
        family = MultiplyShiftFamily.from_seed(200, 1)
        same = np.array_equal(signatures(offsets, values, family),
                              signatures(offsets, values, family, compiled=False))
        print(wide, os.environ.get("NUMBA_CPU_FEATURES", "").endswith("-prefer-256-bit"), same)
        """
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_CPU_FEATURES"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    expected_wide = str(_host_has_avx512())
    assert out == [expected_wide, expected_wide, "True"]
