"""The benchmark's Markdown: main table, stage times, notes, and the nightly table."""

from __future__ import annotations

from neardup_spark.bench.ratios import derive
from neardup_spark.bench.settings import BenchSettings
from neardup_spark.bench.tables import (
    docs_page,
    format_markdown,
    format_nightly,
    format_series,
    nightly_markdown,
    write_page,
)

NIGHTLY_ROW = {
    "index_docs": 300_000,
    "new_docs": 10_000,
    "nightly_seconds": 31.8,
    "full_seconds": 126.0,
    "speedup": 3.96,
    "nightly_cpu_seconds": None,
    "full_cpu_seconds": 121.1,
    "cpu_speedup": None,
    "nightly_growth": 1.77,
    "build_seconds": 122.7,
    "index_bytes": 1260 * 2**20,
    "load_before": 4.15,
    "load_after": 5.97,
    "nightly_work_seconds": 6.25,
    "full_work_seconds": 40.0,
    "work_speedup": 6.4,
    "plain_work_seconds": 38.0,
    "build_work_seconds": 50.0,
    "build_ratio": 1.32,
    "input_bytes": 1400 * 2**20,
    "cross_day_recall": 0.99871,
    "match_work_seconds": 5.9,
    "match_vs_night": 0.944,
}
SERIES = {
    "index_docs": 300_000,
    "new_docs": 10_000,
    "nights": [
        {"night": 1, "work_seconds": 6.0, "index_docs": 310_000, "segments": 2},
        {"night": 2, "work_seconds": 6.6, "index_docs": 320_000, "segments": 3},
    ],
    "first_seconds": 6.0,
    "last_seconds": 6.6,
    "last_over_first": 1.1,
    "first3_mean": 6.3,
    "last3_mean": 6.3,
    "index_bytes": 900 * 2**20,
}


def test_format_markdown(make_row):
    rows = [
        make_row(10_000, "floor", 2.0, 7.0),
        make_row(
            10_000,
            "neardup-minhash",
            4.0,
            9.0,
            pairs=1234,
            recall=0.99876,
            precision=1.0,
            stage_seconds={"read": 1.0, "sketch": 2.5},
        ),
        {"docs": 10_000, "row": "spark-mllib", "status": "skipped", "error": "above max"},
        make_row(10_000, "datasketch", 8.0, 9.5, pairs=1300, recall=0.97, precision=0.93),
    ]
    derive(rows)
    rows[3]["note"] = "a note"
    results = {
        "machine": {
            "cpu_model": "Test CPU",
            "cores": 2,
            "ram_bytes": 24 * 1024**3,
            "python": "3.11.7",
            "spark": "4.0.1",
            "java": "17.0.15",
            "datasketch": "2.0.0",
            "date": "2026-01-01T00:00:00+00:00",
        },
        "settings": {"docs": [10_000], "master": "local[2]", "threshold": 0.8, "seed": 1},
        "rows": rows,
        "total_seconds": 123.4,
    }
    text = format_markdown(results)
    lines = text.splitlines()
    assert "Test CPU, 2 cores, 24.0 GiB RAM; Python 3.11.7, Spark 4.0.1, Java 17.0.15" in text
    header = next(line for line in lines if line.startswith("|  docs") or "| row" in line)
    for name in ("wall s", "JVM start s", "work s", "docs/s", "x floor", "x mllib", "peak GB"):
        assert name in header
    table = [line for line in lines if line.startswith("| 10,000")]
    assert len(table) == 4 + 1  # four rows and one line of the stage table
    nd = next(line for line in table if "neardup-minhash" in line and "2.5" not in line)
    cells = [c.strip() for c in nd.strip("|").split("|")]
    assert cells[:6] == ["10,000", "neardup-minhash", "9.0", "4.0", "4.0", "2,500"]
    assert cells[6] == "0.50" and cells[7] == "-"  # x floor; no mllib
    assert "1,234" in cells and "0.9988" in cells and "2.00" in cells
    assert "skipped: above max" in text
    assert "sketch" in text and "a note" in text
    assert "JVM class archive off" in text and "total bench wall 123 s" in text
    # Every table line has the same width (aligned columns).
    main = [line for line in lines if line.startswith("|")][: 2 + 4]
    assert len({len(line) for line in main}) == 1


def test_nightly_table():
    lines = format_nightly([NIGHTLY_ROW]).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:6] == [
        "index docs",
        "new docs",
        "night work s",
        "full rerun work s",
        "speedup",
        "night growth",
    ]
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == [
        "300,000",
        "10,000",
        "6.2",
        "40.0",
        "6.4x",
        "1.77x",
        "5.9",
        "0.94x",
        "38.0",
        "50.0",
        "1.32x",
        "1,260",
        "1,400",
        "0.90x",
        "0.9987",
        "-",
        "121.1",
        "4.15-5.97",
    ]


def test_series_table():
    text = format_series(SERIES)
    assert text.startswith("2 nights of 10,000 documents on an index of 300,000")
    assert "first 6.0 s, last 6.6 s (1.10x)" in text and "900 MiB" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "night" not in line]
    assert [r.split("|")[4].strip() for r in rows] == ["6.0", "6.6"]


def test_nightly_markdown_with_and_without_an_error():
    ok = nightly_markdown({"rows": [NIGHTLY_ROW], "series": SERIES})
    assert ok.startswith("Nightly: new documents against an index vs a full rerun")
    assert format_nightly([NIGHTLY_ROW]) in ok and "failed" not in ok
    assert ok.endswith(format_series(SERIES) + "\n")
    failed = nightly_markdown({"rows": [], "error": "RuntimeError: boom"})
    assert failed.endswith("\nfailed: RuntimeError: boom\n")


def test_a_docs_page_says_when_where_and_how_it_was_measured(tmp_path):
    machine = {"cpu_model": "Xeon X", "cores": 2, "ram_bytes": 24 * 2**30, "date": "2026-12-03"}
    settings = BenchSettings(docs=[2000], rows=["floor"], no_nightly=True, docs_out=str(tmp_path))
    write_page(tmp_path / "bench-main.md", "Main table", settings, machine, "| a |\n|---|\n")
    page = (tmp_path / "bench-main.md").read_text()
    lines = page.splitlines()
    assert lines[0] == "### Main table"
    assert (
        lines[2].startswith("Machine: Xeon X, 2 cores, 24.0 GiB RAM;") and "2026-12-03" in lines[2]
    )
    assert lines[4] == (
        f"Command: `neardup bench --docs 2000 --rows floor --no-nightly --docs-out {tmp_path}`"
    )
    assert page.endswith("| a |\n|---|\n")
    assert docs_page("T", machine, "c", "body\n\n").endswith("Command: `c`\n\nbody\n")


def test_stage_table_gives_each_stages_growth_between_sizes():
    from neardup_spark.bench.tables import stage_table

    rows = [
        {
            "docs": 1_000,
            "row": "neardup-minhash",
            "work_seconds": 10.0,
            "stage_seconds": {"sketch": 4.0, "verify": 6.0},
        },
        {"docs": 1_000, "row": "other", "work_seconds": 1.0, "stage_seconds": {"sketch": 1.0}},
        {
            "docs": 10_000,
            "row": "neardup-minhash",
            "work_seconds": 100.0,
            "stage_seconds": {"sketch": 40.0, "verify": 60.0 * 10**0.1},
        },
    ]
    lines = stage_table(rows).splitlines()
    growth = [line for line in lines if "growth from 1,000" in line]
    assert len(growth) == 1  # the other row has one size
    cells = [c.strip() for c in growth[0].strip("|").split("|")]
    assert cells[2:] == ["1.00", "1.10", "1.06", "1.00"]  # sketch, verify, sum, work s
    assert lines.index(growth[0]) == len(lines) - 1  # right after the larger size's row
