"""A finished run's tables in index form: labels, pair indices, the contract checks, the summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.errors import UserError
from neardup_spark.kernels.normalize import NormalizeOptions
from neardup_spark.quality.run_tables import RunSettings, output_summary, read_run_tables
from tests.quality.evaluation_scenario import THRESHOLD, write_parquet_dir


def _output(root: Path, clusters: pa.Table, pairs: pa.Table, config: dict | None = None) -> str:
    write_parquet_dir(root / "clusters", clusters)
    write_parquet_dir(root / "pairs", pairs)
    (root / "report.json").write_text(json.dumps({"config": config or {}}))
    return str(root)


def _same_partition(a: np.ndarray, b: list[int]) -> bool:
    pairs_a = {(i, j) for i in range(len(b)) for j in range(len(b)) if a[i] == a[j]}
    pairs_b = {(i, j) for i in range(len(b)) for j in range(len(b)) if b[i] == b[j]}
    return pairs_a == pairs_b


def test_scenario_in_index_form(scenario):
    run = read_run_tables(str(scenario.output))
    assert run.n_docs == len(scenario.ids)
    assert run.ids.to_pylist() == scenario.ids
    assert _same_partition(run.labels, scenario.labels)
    got = sorted(zip(run.pair_a.tolist(), run.pair_b.tolist(), strict=True))
    assert got == sorted(
        (a, b) if scenario.ids[a] < scenario.ids[b] else (b, a) for a, b, _, _ in scenario.pairs
    )
    assert int(np.isnan(run.pair_jaccard).sum()) == 2
    assert run.pair_methods == {"minhash": len(scenario.pairs) - 2, "simhash": 2}
    assert run.settings.threshold == THRESHOLD and run.settings.id_col == "id"
    assert set(run.checks.values()) == {0}


def test_contract_violations_are_counted(tmp_path):
    clusters = pa.table(
        {
            "doc_id": ["a", "b", "c", "c", "d", "e"],
            "cluster_id": ["a", "a", "zz", "zz", None, "e"],
            "is_representative": [True, True, False, False, False, False],
        }
    )
    pairs = pa.table({"doc_a": ["b", "a", "a", "q"], "doc_b": ["a", "b", "e", "a"]})
    run = read_run_tables(_output(tmp_path, clusters, pairs, {"threshold": 0.7}))
    assert run.checks == {
        "duplicate_doc_ids": 1,  # c twice
        "clusters_without_member_id": 2,  # zz, and the null cluster id
        "pairs_unknown_ids": 1,  # q
        "pairs_not_ordered": 2,  # (b, a), (q, a)
        "pairs_across_clusters": 1,  # (a, e)
        "representative_flag_wrong": 2,  # b flagged, e not flagged
    }
    labels = run.labels.tolist()
    assert labels[0] == labels[1] and labels[2] == labels[3]
    assert len(set(labels)) == 4  # the null cluster id is a singleton of its own
    assert run.pair_a.tolist() == [1, 0, 0, -1] and run.pair_b.tolist() == [0, 1, 5, 0]
    assert np.isnan(run.pair_jaccard).all()
    assert run.pair_methods == {"(no method column)": 4}


def test_output_summary_counts_clusters_and_pairs(tmp_path):
    clusters = pa.table(
        {"doc_id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()), "cluster_id": [1, 1, 1, 4, 4, 6]}
    )
    pairs = pa.table(
        {
            "doc_a": pa.array([1, 1, 4], pa.int64()),
            "doc_b": pa.array([2, 3, 5], pa.int64()),
            "jaccard": [0.9, None, 0.85],
            "method": ["minhash", "simhash", "minhash"],
        }
    )
    summary = output_summary(read_run_tables(_output(tmp_path, clusters, pairs)))
    assert summary == {
        "docs": 6,
        "clusters": 3,
        "duplicate_clusters": 2,
        "docs_in_duplicate_clusters": 5,
        "largest_cluster": 3,
        "co_clustered_pairs": 3 + 1,
        "pairs": 3,
        "pairs_by_method": {"minhash": 2, "simhash": 1},
        "pairs_with_jaccard": 2,
    }


def test_missing_report_table_or_column_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"report\.json not found"):
        read_run_tables(str(tmp_path))
    (tmp_path / "report.json").write_text("{}")
    with pytest.raises(UserError, match="clusters table not found"):
        read_run_tables(str(tmp_path))
    out = _output(
        tmp_path / "x", pa.table({"doc_id": ["a"]}), pa.table({"doc_a": ["a"], "doc_b": ["a"]})
    )
    with pytest.raises(UserError, match="lacks column"):
        read_run_tables(out)


def test_settings_are_read_leniently_from_the_report():
    settings = RunSettings.from_report(
        {"config": {"ngram": "3", "normalize": {"casefold": 0, "newer_option": True}}}
    )
    assert settings.threshold is None  # never the default: evaluate asks for one
    assert (settings.ngram, settings.seed, settings.id_col, settings.text_col) == (
        3,
        42,
        "id",
        "text",
    )
    assert settings.normalize == NormalizeOptions(casefold=False)
