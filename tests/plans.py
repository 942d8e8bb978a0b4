"""Plans for tests: a run's steps placed explicitly (``ExecutionSettings(plan=...)``, checked
against the run's facts), and the assertion that a run took the path a test names, read from
its recorded plan (``report["plan"]``)."""

from __future__ import annotations

import logging
from typing import Any

from neardup_spark.config import ExecutionSettings


def placed(**steps: str) -> ExecutionSettings:
    """Execution settings giving these steps' choices: ``placed(sketch="tasks", pairs="spark")``."""
    return ExecutionSettings(plan=dict(steps))


# Every step that reads the input or finds pairs as Spark tasks and stages.
SPARK_READ = placed(sketch="spark")
SPARK_STAGES = placed(pairs="spark")
ALL_SPARK = placed(sketch="spark", pairs="spark", deduplicated="spark_join")


def ran(report: dict[str, Any], **steps: str) -> None:
    """Assert the run's recorded plan placed each of ``steps`` where given."""
    plan = report["plan"]
    for step, where in steps.items():
        assert plan.get(step, {}).get("where") == where, (step, where, plan)


def planned(records: list[logging.LogRecord]) -> dict[str, str]:
    """Each step's choice as the plan logged it (``caplog.records``, with ``neardup_spark.plan``
    at INFO): the plan of a run that failed, so wrote no report."""
    choices = {}
    for record in records:
        if record.name == "neardup_spark.plan":  # "STEP: WHERE (WHY)"
            step, choice = record.getMessage().split(": ", 1)
            choices[step] = choice.split(" ", 1)[0]
    return choices
