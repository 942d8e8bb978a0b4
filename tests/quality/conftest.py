"""The fake dedupe OUTPUTs the evaluation tests score (built once per session, read only)."""

from __future__ import annotations

import pytest

from tests.quality.evaluation_scenario import Scenario, build_scenario


@pytest.fixture(scope="session")
def scenario(tmp_path_factory) -> Scenario:
    return build_scenario(tmp_path_factory.mktemp("scenario"))


@pytest.fixture(scope="session")
def int_scenario(tmp_path_factory) -> Scenario:
    return build_scenario(tmp_path_factory.mktemp("int_scenario"), int_ids=True)
