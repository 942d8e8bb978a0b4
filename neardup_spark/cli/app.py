"""The ``neardup`` command: one adapter module per subcommand registers its options; this
module parses, configures logging, runs the command and maps errors to exit codes.

Exit codes (docs/operations/exit-codes.md), each error in one ``error:`` line, no traceback
unless said:

* 0 success;
* 2 user error, "fix the command": bad arguments, settings (a ``--set`` value Spark refuses,
  a bad memory size), input or output location, an input file that does not read (its footer
  or, found mid-run by Spark or PyArrow, its data);
* 3 machine error, "fix the machine": no Java, the wrong Java, JAVA_HOME pointing nowhere, a
  port that cannot be bound, a master or Spark Connect server that does not answer;
* 1 job failure, "retry" (logged with its traceback); a damaged index (one line: restore it);
  an input that changed under the run (one line: run again);
* 130 / 143 stopped by SIGINT / SIGTERM; 141 standard output closed by its reader.

A failure before the first stage (a session that does not start) is always 2 or 3, never 1: a
retry would fail the same way.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import sys
from collections.abc import Callable, Sequence

from neardup_spark import __version__
from neardup_spark.cli import (
    bench,
    boilerplate,
    decontaminate,
    dedupe,
    eval_boilerplate,
    eval_extract,
    evaluate,
    explain,
    fingerprint,
    generate,
    index,
    ingest,
    jvm_archive,
    match,
    report,
    warmup,
)
from neardup_spark.cli.options import CliParser
from neardup_spark.errors import (
    EXIT_FAILURE,
    EXIT_MACHINE_ERROR,
    EXIT_USER_ERROR,
    MachineError,
    UserError,
    index_damage_in,
    input_change_in,
    input_damage_in,
)
from neardup_spark.io.input_failures import failed_input_read
from neardup_spark.runtime import console
from neardup_spark.runtime.interrupts import Interrupted, handle_signals, received, stop_spark

log = logging.getLogger("neardup_spark")

# In the order `neardup --help` lists them.
SUBCOMMANDS = (
    dedupe,
    boilerplate,
    decontaminate,
    match,
    index,
    fingerprint,
    report,
    explain,
    bench,
    ingest,
    evaluate,
    generate,
    jvm_archive,
    warmup,
    eval_extract,
    eval_boilerplate,
)


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(prog="neardup", description="Near-duplicate detection on Spark.")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log each step, and Spark's own console"
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"neardup-spark {__version__}",
        help="print the version (the package's, CHANGELOG.md) and exit",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=CliParser, metavar="COMMAND"
    )
    for command in SUBCOMMANDS:
        command.register(sub)
    return parser


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command, mapping errors to exit codes."""
    try:
        with handle_signals():
            try:
                code = func(args)
                # A pipe's output waits in Python's buffer: written here, a reader that has
                # gone is this command's broken pipe (below), not an error at exit (exit 120).
                if sys.stdout is not None:
                    sys.stdout.flush()
                return code
            except Exception:
                if received() is not None:  # the job a signal cancelled failed first
                    raise Interrupted(received() or signal.SIGINT) from None
                raise
    except (Interrupted, KeyboardInterrupt) as exc:
        return stopped_by(exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except MachineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MACHINE_ERROR
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and stdout_closed():
            return stdout_was_closed()
        return job_failed(exc, args)


def job_failed(exc: Exception, args: argparse.Namespace) -> int:
    """The exit code of a command that failed with ``exc``, its message shown: an input file
    that does not read (raised here, in a Spark task, or Spark's own read of a file under the
    command's INPUT) is 2 in one line; an input that changed under the run, a damaged index
    are 1 in one line; any other failure is 1, logged with its traceback."""
    given = getattr(args, "input", None)
    inputs = [given] if isinstance(given, str) else []
    unreadable = input_damage_in(exc) or failed_input_read(
        exc, inputs, getattr(args, "input_format", None)
    )
    if unreadable is not None:
        print(f"error: {unreadable}", file=sys.stderr)
        return EXIT_USER_ERROR
    one_line = input_change_in(exc) or index_damage_in(exc)
    if one_line is not None:
        print(f"error: {one_line}", file=sys.stderr)
        return EXIT_FAILURE
    log.exception("the job failed")
    return EXIT_FAILURE


def stdout_closed() -> bool:
    """Whether standard output is a pipe (or socket) whose reader has gone."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no file descriptor, no poll
        return False


def stdout_was_closed() -> int:
    """The reader of standard output went away (``neardup ... | head``): say so in one line,
    send what is left of the output nowhere (not a second error at exit), and exit as a
    process ended by SIGPIPE would (141). Whatever ran before is committed or untouched, as
    for any stop."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    print(
        "error: standard output was closed (broken pipe); nothing more is printed, and what "
        "the command committed stays committed",
        file=sys.stderr,
    )
    return 128 + signal.SIGPIPE


def stopped_by(signum: int) -> int:
    """Say so in one line, stop Spark; the exit code of a process ended by ``signum``."""
    print(
        f"interrupted by {signal.Signals(signum).name}: stopped; the index and OUTPUT hold "
        "nothing this run had not committed; run the same command again to resume",
        file=sys.stderr,
        flush=True,
    )
    stop_spark()
    return 128 + signum


def configure_logging(verbose: bool) -> None:
    """Our log lines on stderr; Spark's console quiet unless ``verbose``."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    console.configure(verbose)
    # One parsable line per stage (stage=NAME rows=N seconds=S) even without --verbose.
    logging.getLogger("neardup_spark.progress").setLevel(logging.INFO)


def parse_intermixed(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """``parser.parse_args``, but a command's optional OUTPUT may also come after options
    (``neardup dedupe IN --index DIR OUT``): argparse fills its positionals from the first run
    of them only, and an optional INPUT took that run."""
    args, extras = parser.parse_known_args(argv)
    if (
        len(extras) == 1
        and not extras[0].startswith("-")
        and getattr(args, "input", None) is not None
        and hasattr(args, "output")
        and args.output is None
    ):
        args.output = extras[0]
    elif extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def parse_and_run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    try:
        args = parse_intermixed(parser, argv)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    configure_logging(args.verbose)
    return run_command(args.func, args)


def main(argv: Sequence[str] | None = None) -> int:
    """``neardup ARGS``; returns the exit code."""
    return parse_and_run(build_parser(), argv)


def job_main(command: str, argv: Sequence[str], prog: str) -> int:
    """A spark-submit entry point (``jobs/*.py``): the subcommand ``command``'s options, parsed
    from ``argv`` under the name ``prog``."""
    parser = CliParser(prog=prog)
    parser.add_argument("-v", "--verbose", action="store_true", help="log each stage")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=CliParser, metavar="COMMAND"
    )
    next(c for c in SUBCOMMANDS if c.__name__.endswith(f".{command}")).register(sub)
    return parse_and_run(parser, [command, *argv])
