"""The core without the extras: every command still parses, a command needing a missing extra
says how to install it (exit 2), and a dedupe run without the report extra writes report.json
and one line on how to get report.html. "Not installed" is simulated by making the imports fail
(``sys.modules[name] = None``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.cli.app import main
from neardup_spark.extras import EXTRAS, missing_modules

REPO = Path(__file__).resolve().parents[2]
EXTRA_MODULES = sorted({m for modules in EXTRAS.values() for m in modules} | {"warcio"})


@pytest.fixture
def without_extras(monkeypatch):
    for module in EXTRA_MODULES:
        monkeypatch.setitem(sys.modules, module, None)


def test_extras_are_installed_in_the_dev_environment():
    assert {extra: missing_modules(extra) for extra in EXTRAS} == {e: [] for e in EXTRAS}


def test_commands_needing_a_missing_extra_say_how_to_install_it(without_extras, capsys):
    assert missing_modules("ingest") == ["fastwarc", "resiliparse", "brotli"]
    assert main(["ingest", "crawl.warc.gz", "out"]) == 2
    assert main(["report", "out"]) == 2
    assert main(["bench", "--rows", "datasketch"]) == 2
    assert main(["bench", "--rows", "floor,rensa"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: neardup ingest needs the ingest extra (fastwarc, resiliparse, brotli not "
        "installed): pip install 'neardup-spark[ingest]'",
        "error: neardup report needs the report extra (matplotlib not installed): "
        "pip install 'neardup-spark[report]'",
        "error: the datasketch row of neardup bench (or leave it out with --rows) needs the bench "
        "extra (datasketch, rensa not installed): pip install 'neardup-spark[bench]'",
        "error: the rensa row of neardup bench (or leave it out with --rows) needs the bench "
        "extra (datasketch, rensa not installed): pip install 'neardup-spark[bench]'",
    ]


BLOCKED_MAIN = (
    "import sys\n"
    f"for name in {EXTRA_MODULES!r}:\n"
    "    sys.modules[name] = None\n"
    "from neardup_spark.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.mark.slow
def test_dedupe_without_the_report_extra_writes_report_json(tmp_path):
    corpus, out = tmp_path / "in.parquet", tmp_path / "out"
    texts = ["one two three four five six seven"] * 2 + ["other words entirely"]
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": texts}), corpus)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            BLOCKED_MAIN,
            "dedupe",
            str(corpus),
            str(out),
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "report.json").read_text())["counts"]["clusters"] == 2
    assert not (out / "report.html").exists()
    lines = [line for line in done.stdout.splitlines() if line.startswith("report ")]
    assert lines == [
        "report            report.json only; for report.html: pip install "
        f"'neardup-spark[report]', then neardup report {out}"
    ]
