"""``python -m neardup_spark`` is the ``neardup`` command."""

from neardup_spark.cli import command

command()
