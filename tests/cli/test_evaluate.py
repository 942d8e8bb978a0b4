"""``neardup evaluate`` through the command line: the table, ``--json``, exit codes."""

from __future__ import annotations

import json

import pytest

from neardup_spark.cli import main
from tests.quality.evaluation_scenario import Scenario, build_scenario, synthetic_labelled_dir


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Scenario:
    return build_scenario(tmp_path_factory.mktemp("scenario"))


def test_command_line(scenario, tmp_path, capsys):
    out_json = tmp_path / "result.json"
    code = main(
        [
            "evaluate",
            str(scenario.output),
            "--truth",
            str(scenario.truth_path),
            "--json",
            str(out_json),
        ]
    )
    assert code == 0
    assert "pair recall" in capsys.readouterr().out
    assert json.loads(out_json.read_text())["truth"]["pairs"] == len(scenario.corpus.truth)
    assert main(["evaluate", str(tmp_path / "nowhere")]) == 2
    assert "not found" in capsys.readouterr().err


def test_every_option_reaches_the_evaluation(scenario, tmp_path, capsys):
    labelled = synthetic_labelled_dir(tmp_path)
    out_json = tmp_path / "result.json"
    argv = ["evaluate", str(scenario.output), "--truth", str(scenario.truth_path.parent)]
    argv += ["--corpus", str(scenario.corpus_path), "--threshold", "0.5"]
    argv += ["--labelled", str(labelled), "--json", str(out_json)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(threshold 0.5 from argument)" in out
    assert "Exact all-pairs oracle" in out and "Labelled sets" in out
    result = json.loads(out_json.read_text())
    assert result["threshold"] == 0.5 and result["labelled"]["dir"] == str(labelled)
    assert result["truth"]["truth"] == str(scenario.truth_path)


def test_user_errors_exit_2(scenario, capsys):
    assert main(["evaluate", str(scenario.output), "--threshold", "2"]) == 2
    assert "threshold must be in (0, 1]" in capsys.readouterr().err
    argv = ["evaluate", str(scenario.output), "--corpus", str(scenario.corpus_path)]
    assert main([*argv, "--oracle-max-docs", "3"]) == 2
    assert "limited to 3" in capsys.readouterr().err
