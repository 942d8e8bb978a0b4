"""``neardup ingest`` and ``jobs/ingest_warc.py``: options, exit codes, what is printed."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup_spark.cli import main
from neardup_spark.cli.app import build_parser
from tests.spark_state import cli_on_session

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = 5


@pytest.fixture(scope="module")
def small_warc(tmp_path_factory) -> Path:
    """A gzip WARC file (written with warcio) of DOCUMENTS HTML pages, a request and an image."""
    path = tmp_path_factory.mktemp("warc") / "small.warc.gz"
    with open(path, "wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        pages = [
            (f"page{i}", "text/html", f"<html><body><p>Page {i} about bridges.</p></body></html>")
            for i in range(DOCUMENTS)
        ]
        for name, content_type, body in [*pages, ("image", "image/png", "\x89PNG\r\n\x1a\n")]:
            http = StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")
            writer.write_record(
                writer.create_warc_record(
                    f"http://example.com/{name}",
                    "response",
                    payload=io.BytesIO(body.encode("latin-1")),
                    http_headers=http,
                )
            )
        request = StatusAndHeaders(
            "GET / HTTP/1.1", [("Host", "example.com")], is_http_request=True
        )
        writer.write_record(
            writer.create_warc_record(
                "http://example.com/", "request", payload=io.BytesIO(b""), http_headers=request
            )
        )
    return path


def test_ingest_command_line_arguments():
    args = build_parser().parse_args(
        ["ingest", "a.warc.gz", "dir", "out", "--record-types", "response,resource"]
    )
    assert args.paths == ["a.warc.gz", "dir"] and args.output == "out"
    assert args.record_types == ("response", "resource") and args.extract == "main"
    assert args.content_types == ("text/html", "application/xhtml+xml")
    assert not args.overwrite


def test_mistakes_exit_2_before_spark_starts(small_warc, tmp_path, capsys):
    assert main(["ingest", str(tmp_path / "nope.warc.gz"), str(tmp_path / "out")]) == 2
    assert "error: input not found" in capsys.readouterr().err
    bad_types = ["ingest", str(small_warc), str(tmp_path / "out"), "--record-types", "request"]
    assert main(bad_types) == 2
    assert "--record-types takes one or more of" in capsys.readouterr().err
    assert main(["ingest", str(small_warc), str(tmp_path / "out"), "--extract", "all"]) == 2
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_ingest_job_entry_point(spark, small_warc, tmp_path, capsys):
    """``jobs/ingest_warc.py`` as a script in a process of its own: a missing input exits 2,
    a run prints its summary. The refusal of a finished OUTPUT, and ``neardup dedupe`` reading
    OUTPUT, run the commands in this process on the suite's session (only the entry point
    needs its own)."""

    def job(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
        return subprocess.run(
            [sys.executable, str(REPO / "jobs" / "ingest_warc.py"), *args],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    out = tmp_path / "out"
    missing = job(str(tmp_path / "nope.warc.gz"), str(out))
    assert missing.returncode == 2 and "input not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    args = [str(small_warc), str(out), "--master", "local[1]"]
    done = job(*args, "--set", "arrow_batch_size=3")  # batches of 3 records: several per file
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"documents         {DOCUMENTS}" in done.stdout and "neardup dedupe" in done.stdout
    assert f"records           {DOCUMENTS + 2}" in done.stdout
    assert len(ds.dataset(str(out)).to_table()) == DOCUMENTS
    with cli_on_session(spark) as run:
        assert run(["ingest", *args]) == 2
        again = capsys.readouterr().err
        assert "already holds a finished ingest" in again and "Traceback" not in again
        # OUTPUT is the corpus: `neardup dedupe OUTPUT` reads it as it is.
        assert run(["dedupe", str(out), str(tmp_path / "deduped"), "--no-report"]) == 0
    assert f"documents in      {DOCUMENTS}" in capsys.readouterr().out
