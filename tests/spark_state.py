"""The suite's shared SparkSession: what a test may leave on it, read the same way on every
Spark the tests run on, and settings changed for one block only."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest

# The commands that build a Spark session of their own (cli/<command>.py's build_session).
SESSION_COMMANDS = ("dedupe", "index", "boilerplate", "ingest")


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


@contextmanager
def cli_on_session(spark) -> Iterator[Callable[[Sequence[str]], int]]:
    """``neardup ARGS`` in this process on ``spark`` (the suite's session): the commands get it
    instead of building one (so their session options do not reach it), its ``stop()`` does
    nothing, and a command that takes itself for signalled fails the test instead of stopping
    the suite's session. Yields ``run(argv) -> exit code``."""
    from neardup_spark.cli import app
    from neardup_spark.runtime import interrupts

    stops: list[int | None] = []
    with pytest.MonkeyPatch.context() as patch:
        for command in SESSION_COMMANDS:
            patch.setattr(f"neardup_spark.cli.{command}.build_session", lambda *_, **__: spark)
        # On the class: an instance attribute, once undone, would shadow later class patches
        patch.setattr(type(spark), "stop", lambda self: None)
        patch.setattr(app, "stop_spark", lambda: stops.append(interrupts.received()))

        def run(argv: Sequence[str]) -> int:
            code = app.main(list(argv))
            assert not stops, f"the command took itself for stopped by signal {stops[0]}"
            return code

        yield run
