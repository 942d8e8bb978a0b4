"""The benchmark's pure parts, its process-tree memory sampler, and one tiny end-to-end run."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.bench.processes import process_tree, run_measured
from neardup_spark.bench.run import (
    DEFAULT_DATASKETCH_MAX_DOCS,
    DEFAULT_MLLIB_MAX_DOCS,
    ROWS,
    Corpus,
    _mllib_dropped,
    derive,
    ensure_corpus,
    exact_pair_jaccard,
    format_markdown,
    growth_exponent,
    pair_quality,
    ratio,
    score_rows,
    unique_pairs,
)
from neardup_spark.cli.bench import add_bench_options, run_bench
from neardup_spark.kernels.normalize import normalize_text

MB = 1024 * 1024


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_options(parser)
    return parser.parse_args(list(argv))


# ------------------------------------------------------------------------------------------
# Arguments


def test_defaults():
    args = parse()
    assert args.docs == [10_000, 30_000, 100_000]
    assert args.rows == list(ROWS)
    assert args.workdir == "out/bench" and args.results is None and args.markdown is None
    assert args.threshold == 0.8 and args.master == "local[2]"
    assert args.mllib_max_docs == DEFAULT_MLLIB_MAX_DOCS == 100_000
    assert args.datasketch_max_docs == DEFAULT_DATASKETCH_MAX_DOCS == 100_000
    # The nightly case (issue 6) runs after the main table unless --no-nightly.
    assert args.nightly_sizes == [100_000, 300_000] and args.nightly_new == 10_000
    assert not args.no_nightly and not args.nightly_only


def test_docs_and_rows_are_parsed_and_ordered():
    args = parse("--docs", "1000000,300", "--rows", "datasketch,floor")
    assert args.docs == [300, 1_000_000]
    assert args.rows == ["floor", "datasketch"]  # the canonical order, whatever was typed
    with pytest.raises(SystemExit):
        parse("--rows", "floor,nope")
    with pytest.raises(SystemExit):
        parse("--docs", "ten")


# ------------------------------------------------------------------------------------------
# Pure numbers


def test_growth_exponent():
    assert growth_exponent(10_000, 2.0, 100_000, 20.0) == pytest.approx(1.0)
    assert growth_exponent(10_000, 1.0, 100_000, 100.0) == pytest.approx(2.0)
    assert growth_exponent(30_000, 6.0, 100_000, 10.0) == pytest.approx(
        math.log(10 / 6) / math.log(100 / 30)
    )
    assert growth_exponent(10, None, 100, 1.0) is None
    assert growth_exponent(10, 1.0, 10, 2.0) is None
    assert growth_exponent(10, 0.0, 100, 2.0) is None


def test_ratio():
    assert ratio(10.0, 4.0) == 2.5
    assert ratio(None, 4.0) is None and ratio(1.0, None) is None and ratio(1.0, 0.0) is None


def test_unique_pairs_orders_dedupes_and_drops_self_pairs():
    lo, hi, first = unique_pairs([3, 1, 0, 2, 4], [1, 3, 1, 2, 0])
    assert list(zip(lo.tolist(), hi.tolist(), strict=True)) == [(1, 3), (0, 1), (0, 4)]
    assert first.tolist() == [0, 2, 4]
    empty = unique_pairs([], [])
    assert all(a.size == 0 for a in empty)


def test_pair_quality_hand_made():
    # Truth: (0,1) J=.9, (1,2) J=.85, (3,4) J=.95 are positives at 0.8; (4,5) J=.5 is not.
    truth_a, truth_b, truth_j = [0, 1, 3, 4], [1, 2, 4, 5], [0.9, 0.85, 0.95, 0.5]
    # Found: (1,0) right, (0,2) right (J .82) and links 1-2 by transitivity, (3,5) wrong,
    # (0,1) again (a repeat), (4,4) a self-pair.
    found_a, found_b = [1, 0, 3, 0, 4], [0, 2, 5, 1, 4]
    found_j = [0.9, 0.82, 0.3, 0.9, 1.0]
    q = pair_quality(found_a, found_b, found_j, truth_a, truth_b, truth_j, 0.8, n_docs=6)
    assert q["pairs"] == 3 and q["pairs_correct"] == 2
    assert q["precision"] == pytest.approx(2 / 3)
    assert q["positives"] == 3 and q["positives_found"] == 2  # (3,4) not connected
    assert q["recall"] == pytest.approx(2 / 3)


def test_pair_quality_nothing_found():
    q = pair_quality([], [], [], [0], [1], [0.9], 0.8, n_docs=2)
    assert q["pairs"] == 0 and q["precision"] is None and q["recall"] == 0.0
    q = pair_quality([0], [1], [0.9], [], [], [], 0.8, n_docs=2)
    assert q["recall"] is None and q["precision"] == 1.0


def test_pair_quality_precision_over_measured_pairs_only():
    # Three distinct pairs, one not measured (NaN): precision over the two measured ones, but
    # every pair (measured or not) joins components for recall.
    q = pair_quality(
        [0, 2, 4], [1, 3, 5], [0.9, float("nan"), 0.1], [2], [3], [0.95], 0.8, n_docs=6
    )
    assert q["pairs"] == 3 and q["pairs_measured"] == 2 and q["pairs_correct"] == 1
    assert q["precision"] == 0.5 and q["recall"] == 1.0


def _brute_jaccard(x: str, y: str, k: int = 5) -> float:
    def shingles(text: str) -> set[tuple[str, ...]]:
        words = (normalize_text(text) or "").split()
        if len(words) < k:
            return {tuple(words)} if words else set()
        return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}

    a, b = shingles(x), shingles(y)
    return len(a & b) / len(a | b) if a | b else 0.0


def test_exact_pair_jaccard_matches_brute_force():
    base = " ".join(f"w{i}" for i in range(40))
    texts = pa.array(
        [
            base,
            base.replace("w20", "x"),
            base.upper() + "!",
            "short text",
            "short text",
            "",
            " ".join(f"w{i}" for i in range(10, 50)),
        ],
        pa.large_string(),
    )
    a = np.array([0, 0, 3, 0, 5, 1, 6])
    b = np.array([1, 2, 4, 6, 6, 6, 0])
    got = exact_pair_jaccard(texts, a, b)
    want = [_brute_jaccard(texts[i].as_py(), texts[j].as_py()) for i, j in zip(a, b, strict=True)]
    assert got == pytest.approx(want)
    assert got[1] == 1.0 and got[2] == 1.0


def test_mllib_dropped_counts_documents_under_five_tokens():
    texts = pa.array(["a b c d e", "a b c d", "a,b;c.d!e", None, "", "one two three four five six"])
    assert _mllib_dropped(texts) == 3  # "a b c d", null, ""


# ------------------------------------------------------------------------------------------
# Derived numbers and the table


def _row(docs: int, row: str, work: float, wall: float, **extra) -> dict:
    return {
        "docs": docs,
        "row": row,
        "status": "ok",
        "error": None,
        "work_seconds": work,
        "wall_seconds": wall,
        "spark_start_seconds": 4.0 if row != "datasketch" else None,
        "docs_per_second": docs / work,
        "docs_per_second_wall": docs / wall,
        "peak_rss_bytes": 2 * 1024**3,
        **extra,
    }


def test_derive_growth_and_ratios():
    rows = [
        _row(10_000, "floor", 2.0, 7.0),
        _row(10_000, "neardup-minhash", 4.0, 9.0),
        _row(10_000, "spark-mllib", 16.0, 21.0),
        _row(100_000, "floor", 20.0, 25.0),
        _row(100_000, "neardup-minhash", 40.0, 45.0),
        {"docs": 100_000, "row": "spark-mllib", "status": "timeout", "error": "timed out"},
    ]
    derive(rows)
    small_floor, small_nd, small_ml, big_floor, big_nd, big_ml = rows
    assert small_nd["vs_floor"] == pytest.approx(0.5)
    assert small_nd["vs_mllib"] == pytest.approx(4.0)
    assert small_nd["vs_mllib_wall"] == pytest.approx(21 / 9)
    assert small_floor["vs_floor"] == 1.0 and small_ml["vs_mllib"] == 1.0
    assert small_nd["growth_exponent"] is None
    assert big_nd["growth_exponent"] == pytest.approx(1.0)
    assert big_floor["growth_exponent"] == pytest.approx(1.0)
    assert big_nd["vs_mllib"] is None  # no mllib result at that size
    assert big_ml["growth_exponent"] is None and big_ml["vs_floor"] is None


def test_format_markdown():
    rows = [
        _row(10_000, "floor", 2.0, 7.0),
        _row(
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
        _row(10_000, "datasketch", 8.0, 9.5, pairs=1300, recall=0.97, precision=0.93),
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
    # Every table line has the same width (aligned columns).
    main = [line for line in lines if line.startswith("|")][: 2 + 4]
    assert len({len(line) for line in main}) == 1


# ------------------------------------------------------------------------------------------
# Process-tree memory and timeouts

GRANDCHILD = textwrap.dedent(
    """
    import os, sys, time
    with open(sys.argv[1], "w") as handle:
        handle.write(str(os.getpid()))
    data = bytearray(int(sys.argv[2]))
    for i in range(0, len(data), 4096):  # zero pages are not resident until touched
        data[i] = 1
    time.sleep(float(sys.argv[3]))
    """
)
PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    grandchild, pid_file, own, child_size, sleep = sys.argv[1:]
    data = bytearray(int(own))
    for i in range(0, len(data), 4096):
        data[i] = 1
    child = subprocess.Popen([sys.executable, "-c", grandchild, pid_file, child_size, sleep])
    time.sleep(float(sleep))
    child.wait()
    """
)


def _tree_command(own_mb: int, child_mb: int, sleep: float, pid_file: Path) -> list[str]:
    """A python process holding ``own_mb`` that starts one holding ``child_mb``."""
    return [
        sys.executable,
        "-c",
        PARENT,
        GRANDCHILD,
        str(pid_file),
        str(own_mb * MB),
        str(child_mb * MB),
        str(sleep),
    ]


def test_sampler_sums_the_process_tree(tmp_path):
    measured = run_measured(
        _tree_command(150, 100, 1.5, tmp_path / "grandchild.pid"),
        tmp_path / "log.txt",
        timeout=60,
    )
    assert measured.returncode == 0, (tmp_path / "log.txt").read_text()
    assert not measured.timed_out
    assert measured.samples >= 5
    # 250 MB allocated across two processes, plus two interpreters (~10 MB each).
    assert 240 * MB <= measured.peak_rss_bytes <= 600 * MB
    assert 1.5 <= measured.wall_seconds < 30


def test_timeout_ends_the_whole_tree(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    started = time.perf_counter()
    measured = run_measured(
        _tree_command(1, 1, 120, pid_file),
        tmp_path / "log.txt",
        timeout=5,
    )
    assert measured.timed_out
    assert time.perf_counter() - started < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while process_tree(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process_tree(grandchild) == []


def test_process_tree_of_this_process():
    tree = process_tree(os.getpid())
    assert tree[0] == os.getpid()
    assert process_tree(2**31 - 1) == []


# ------------------------------------------------------------------------------------------
# Corpora and one tiny end-to-end run


def test_corpus_is_generated_once(tmp_path):
    first = ensure_corpus(tmp_path, 60, seed=3, timeout=120)
    assert not first["reused"]
    assert (Path(first["path"]) / "corpus").is_dir() and (Path(first["path"]) / "truth").is_dir()
    second = ensure_corpus(tmp_path, 60, seed=3, timeout=120)
    assert second["reused"] and second["path"] == first["path"]


@pytest.mark.slow
def test_tiny_bench_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NEARDUP_SPARK_JVM_ARCHIVE", "off")  # building one: test_jvm_archive.py
    args = parse(
        "--docs",
        "300",
        "--rows",
        "floor,datasketch",
        "--workdir",
        str(tmp_path / "bench"),
        "--timeout",
        "240",
        "--no-nightly",
    )
    assert run_bench(args) == 0
    results = json.loads((tmp_path / "bench" / "results.json").read_text())
    rows = {r["row"]: r for r in results["rows"]}
    assert set(rows) == {"floor", "datasketch"}
    floor, sketch = rows["floor"], rows["datasketch"]
    assert floor["status"] == "ok" and sketch["status"] == "ok"
    assert floor["counts"]["docs"] == 300 and floor["counts"]["shingles"] > 0
    assert floor["spark_start_seconds"] > 0 and sketch["spark_start_seconds"] is None
    assert floor["peak_rss_bytes"] > sketch["peak_rss_bytes"] > 0  # the JVM is counted
    assert 0.9 <= sketch["recall"] <= 1.0 and 0.5 <= sketch["precision"] <= 1.0
    assert sketch["vs_floor"] == pytest.approx(sketch["docs_per_second"] / floor["docs_per_second"])
    markdown = (tmp_path / "bench" / "results.md").read_text()
    assert "| datasketch" in markdown and markdown in capsys.readouterr().out
    assert "JVM class archive off" in markdown and results["settings"]["jvm_archive"] is None


def test_score_rows_against_brute_force(tmp_path):
    """A tiny corpus, truth and two fake rows' pairs/; the second row's precision sampled."""
    import pyarrow.parquet as pq

    base = [" ".join(f"w{d}x{i}" for i in range(100)) for d in range(6)]
    texts = [base[0], base[0] + " tail", base[1], base[1].replace("w1x9 ", "z "), *base[2:], ""]
    ids = [f"d{i}" for i in range(len(texts))]
    root = tmp_path / "c"
    (root / "corpus").mkdir(parents=True)
    (root / "truth").mkdir()
    pq.write_table(pa.table({"id": ids, "text": texts}), root / "corpus" / "part-0.parquet")
    truth_pairs = [("d0", "d1"), ("d2", "d3"), ("d4", "d5")]
    truth_j = [_brute_jaccard(texts[ids.index(a)], texts[ids.index(b)]) for a, b in truth_pairs]
    pq.write_table(
        pa.table(
            {
                "doc_a": [a for a, _ in truth_pairs],
                "doc_b": [b for _, b in truth_pairs],
                "kind": ["x"] * 3,
                "jaccard": truth_j,
            }
        ),
        root / "truth" / "part-0.parquet",
    )
    records = []
    for name, pairs in (
        ("datasketch", [("d1", "d0"), ("d0", "d1"), ("d4", "d6")]),
        ("spark-mllib", [("d2", "d3"), ("d0", "d1"), ("d4", "d5"), ("d6", "d7")]),
    ):
        out = tmp_path / name
        (out / "pairs").mkdir(parents=True)
        pq.write_table(
            pa.table({"doc_a": [a for a, _ in pairs], "doc_b": [b for _, b in pairs]}),
            out / "pairs" / "part-0.parquet",
        )
        records.append({"docs": len(ids), "row": name, "status": "ok", "output": str(out)})
    records.append({"docs": len(ids), "row": "floor", "status": "ok", "output": "unused"})
    score_rows(records, Corpus(len(ids), root), 0.8, precision_sample=2)
    sketch, mllib, floor = records
    assert "pairs" not in floor
    positives = sum(j >= 0.8 for j in truth_j)
    assert positives == 2  # (d0,d1) and (d2,d3); (d4,d5) are unrelated
    assert sketch["pairs"] == 2 and sketch["quality"]["pairs_measured"] == 2
    assert sketch["precision"] == 0.5  # (d0,d1) right, (d4,d6) wrong
    assert sketch["recall"] == 0.5  # (d2,d3) missed
    assert mllib["pairs"] == 4 and mllib["quality"]["pairs_measured"] == 2
    assert mllib["recall"] == 1.0
    assert "uniform sample of 2 of 4" in mllib["note"] and "dropped" in mllib["note"]
    assert mllib["mllib_dropped_docs"] == 1  # the empty text


def test_nightly_options_and_table():
    from neardup_spark.bench.nightly import format_nightly

    args = parse("--nightly-sizes", "1000,3_000", "--nightly-new", "100", "--nightly-only")
    assert args.nightly_sizes == [1000, 3000] and args.nightly_new == 100 and args.nightly_only
    with pytest.raises(SystemExit):
        parse("--nightly-sizes", "0")
    with pytest.raises(SystemExit):
        parse("--no-nightly", "--nightly-only")
    row = {
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
    }
    table = format_nightly([row]).splitlines()
    assert table[0].startswith("| index docs | new docs | nightly s | full rerun s | speedup")
    assert table[2] == (
        "| 300,000 | 10,000 | 31.8 | 126.0 | 4.0x | - | 121.1 | - | 1.77 | 122.7 | 1,260 MiB "
        "| 4.15-5.97 |"
    )
