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


class InputUnreadable(UserError):
    """An input file whose footer reads but whose data does not (a damaged page, a codec's
    error), found while a run reads it: exit 2, one line naming the file, its format and what
    failed (:func:`~neardup_spark.batch.input_reads.unreadable_input`)."""


class InputChanged(RuntimeError):
    """The input is not what the run listed: fewer or more rows read than its files' footers
    give, a row at an address not the one read before. Exit 1 in one line: the input changed
    under the run (or a reader lost rows), and a run on the input as it now is may succeed."""


# How these errors, raised in a Spark task, read in the error the driver gets (Python's
# traceback names an exception raised there as ``module.Name: message``).
INDEX_DAMAGED_MARK = "IndexDamaged: "
INPUT_UNREADABLE_MARK = "InputUnreadable: "
INPUT_CHANGED_MARK = "InputChanged: "


def marked_in(exc: BaseException, kind: type[BaseException], mark: str) -> str | None:
    """The message of a ``kind`` error that ``exc`` is, or carries in its text after ``mark``
    (raised on an executor, it reaches the driver inside Spark's error), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return str(seen)
        text = str(seen)
        if mark in text:
            return text.split(mark, 1)[1].splitlines()[0].strip()
        seen = seen.__cause__ or seen.__context__
    return None


def index_damage_in(exc: BaseException) -> str | None:
    """The message of an :class:`IndexDamaged` that ``exc`` is or carries, else None."""
    return marked_in(exc, IndexDamaged, INDEX_DAMAGED_MARK)


def input_damage_in(exc: BaseException) -> str | None:
    """The message of an :class:`InputUnreadable` that ``exc`` is or carries, else None."""
    return marked_in(exc, InputUnreadable, INPUT_UNREADABLE_MARK)


def input_change_in(exc: BaseException) -> str | None:
    """The message of an :class:`InputChanged` that ``exc`` is or carries, else None."""
    return marked_in(exc, InputChanged, INPUT_CHANGED_MARK)
