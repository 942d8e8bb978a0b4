"""Shared inputs of the stage tests: a few documents (near copies, nulls, punctuation only, a
short text), their text features and MinHash sketches."""

from __future__ import annotations

import pytest

from neardup_spark.config import build_config
from neardup_spark.stages.documents import (
    minhash_sketch,
    text_features,
)

BASE = " ".join(f"word{i}" for i in range(60))


NEAR = BASE.replace("word30", "changed")


@pytest.fixture(scope="module")
def config():
    return build_config()


@pytest.fixture(scope="module")
def docs(spark):
    rows = [
        ("a", BASE),
        ("b", NEAR),
        ("c", "something else entirely " * 5),
        ("d", None),
        ("e", " ,. "),
        ("f", "two words"),
    ]
    return spark.createDataFrame(rows, "doc_id string, text string")


@pytest.fixture(scope="module")
def fingerprints(docs, config):
    return docs.transform(text_features(config.normalize)).cache()


@pytest.fixture(scope="module")
def sketches(fingerprints, config):
    return fingerprints.transform(minhash_sketch(config)).cache()


@pytest.fixture(scope="module")
def base_text() -> str:
    """Document "a"'s text (already normalised)."""
    return BASE
