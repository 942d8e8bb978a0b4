"""Ingest options: the defaults, and the mistakes refused before Spark starts."""

from __future__ import annotations

import pytest

from neardup_spark.errors import UserError
from neardup_spark.ingest.options import HTML_TYPES, IngestOptions


def test_defaults_are_valid():
    options = IngestOptions()
    options.validate()
    assert options.extract == "main"
    assert options.record_types == ("response", "conversion")
    assert options.content_types == HTML_TYPES


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"extract": "all"}, "--extract must be one of main, text"),
        ({"record_types": ("request",)}, "--record-types takes one or more of"),
        ({"record_types": ()}, "got nothing"),
        ({"content_types": ("html",)}, "--content-types takes MIME types"),
        ({"content_types": ()}, "--content-types takes MIME types"),
        ({"max_payload_bytes": 0}, "must be positive"),
        ({"batch_rows": 0}, "must be positive"),
    ],
)
def test_bad_options_are_user_errors(kwargs, message):
    with pytest.raises(UserError, match=message):
        IngestOptions(**kwargs).validate()
