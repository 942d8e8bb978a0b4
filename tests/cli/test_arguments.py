"""The command line's positionals as users type them: OUTPUT after options too."""

from __future__ import annotations

import pytest

from neardup_spark.cli.app import build_parser, parse_intermixed
from neardup_spark.errors import UserError


@pytest.mark.parametrize(
    "argv",
    [
        ["dedupe", "IN", "OUT", "--index", "IDX"],
        ["dedupe", "--index", "IDX", "IN", "OUT"],
        ["dedupe", "IN", "--index", "IDX", "OUT"],
        ["dedupe", "IN", "--threshold", "0.9", "--index", "IDX", "OUT", "--no-report"],
    ],
)
def test_output_may_follow_options(argv):
    args = parse_intermixed(build_parser(), argv)
    assert (args.input, args.output, args.index) == ("IN", "OUT", "IDX")


def test_input_table_takes_the_one_positional_as_output():
    args = parse_intermixed(build_parser(), ["dedupe", "--input-table", "t", "OUT"])
    assert (args.input, args.input_table, args.output) == ("OUT", "t", None)  # cli/dedupe.py swaps


@pytest.mark.parametrize(
    ("argv", "unrecognized"),
    [
        (["dedupe", "IN", "--index", "IDX", "OUT", "MORE"], "OUT MORE"),
        (["dedupe", "IN", "OUT", "--index", "IDX", "MORE"], "MORE"),
        (["dedupe", "IN", "OUT", "--bogus"], "--bogus"),
        (["index", "verify", "DIR", "EXTRA"], "EXTRA"),
    ],
)
def test_anything_else_left_over_is_a_user_error(argv, unrecognized):
    with pytest.raises(UserError, match=f"unrecognized arguments: {unrecognized}$"):
        parse_intermixed(build_parser(), argv)
