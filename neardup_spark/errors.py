"""Errors the command line turns into exit codes: 2 "fix the command", 3 "fix the machine",
1 a job failure a retry may get past."""


class UserError(Exception):
    """A mistake in arguments, configuration, input or output location: exit code 2.

    The message is shown to the user as is, without a traceback, so it must say what is wrong
    and, where it can, what to do.
    """


class MachineError(Exception):
    """The machine or a service it needs is not as a run needs it, whatever the command says:
    no Java, the wrong Java, JAVA_HOME pointing nowhere, a port that cannot be bound, a master
    or Spark Connect server that does not answer: exit code 3. A retry fails the same way until
    the machine changes.

    Shown as :class:`UserError`'s: one line, no traceback, saying what to fix.
    """


EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USER_ERROR = 2
EXIT_MACHINE_ERROR = 3


class IndexDamaged(Exception):
    """A file of the index is missing or not as it was written (exit 1: the job cannot go on;
    the message names the file and the remedy, shown without a traceback)."""


# How an IndexDamaged raised in a Spark task reads in the error the driver gets.
INDEX_DAMAGED_MARK = "IndexDamaged: "


def index_damage_in(exc: BaseException) -> str | None:
    """The message of an :class:`IndexDamaged` that ``exc`` is, or carries in its text (raised
    on an executor, it reaches the driver inside Spark's error), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, IndexDamaged):
            return str(seen)
        text = str(seen)
        if INDEX_DAMAGED_MARK in text:
            return text.split(INDEX_DAMAGED_MARK, 1)[1].splitlines()[0].strip()
        seen = seen.__cause__ or seen.__context__
    return None
