"""The suite's shared SparkSession: what a test may leave on it, read the same way on every
Spark the tests run on, and settings changed for one block only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def session_settings(session) -> dict[str, str]:
    """The settings made on ``session`` (``RuntimeConfig.getAll`` is PySpark 4's; 3.5, in make
    test-compat, lists them with SQL's ``SET``)."""
    if hasattr(session.conf, "getAll"):
        return dict(session.conf.getAll)
    return {row[0]: row[1] for row in session.sql("SET").collect()}


@contextmanager
def session_conf(spark, settings: dict[str, str]) -> Iterator[None]:
    """Spark SQL settings for the block; the session's own values (or none: its defaults) come
    back afterwards."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
