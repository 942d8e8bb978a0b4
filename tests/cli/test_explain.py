"""``neardup explain`` through the command line: the readable account, ``--json``, exit codes."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.cli import main
from neardup_spark.quality.worked_examples import D1, D2


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain_cli")
    pq.write_table(pa.table({"id": ["d1", "d2"], "text": [D1, D2]}), root / "part-0.parquet")
    return str(root)


def test_cli_exit_codes(small, capsys):
    assert main(["explain", small, "d1", "d2", "--ngram", "3"]) == 0
    out = capsys.readouterr().out
    assert "jaccard   0.3333" in out and "verdict" in out
    assert main(["explain", small, "d1", "zzz"]) == 2
    assert "'zzz'" in capsys.readouterr().err
    assert main(["explain", small, "d1", "d2", "--json"]) == 0
    assert '"verdict"' in capsys.readouterr().out


def test_options_reach_the_explanation(small, capsys):
    argv = ["explain", small, "d1", "d2", "--ngram", "3", "--shared", "2", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["config"]["ngram"] == 3 and len(result["shingles"]["examples"]) == 2
    assert main(["explain", small, "d1", "d2", "--method", "simhash", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["method"] == "simhash"
    assert main(["explain", small, "d1", "d2", "--id-col", "key"]) == 2
    assert "id column 'key'" in capsys.readouterr().err
