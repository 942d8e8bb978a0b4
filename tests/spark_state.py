"""What a test may leave on the suite's shared SparkSession, read the same way on every Spark
the tests run on."""

from __future__ import annotations


def session_settings(session) -> dict[str, str]:
    """The settings made on ``session`` (``RuntimeConfig.getAll`` is PySpark 4's; 3.5, in make
    test-compat, lists them with SQL's ``SET``)."""
    if hasattr(session.conf, "getAll"):
        return dict(session.conf.getAll)
    return {row[0]: row[1] for row in session.sql("SET").collect()}
