"""The typed config: defaults, layering, validation."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
from pathlib import Path

import pytest
import yaml

from neardup_spark.config import (
    DedupeConfig,
    build_config,
    default_settings_dict,
    load_settings,
    parse_override,
    parse_prefer,
    prefer_hint,
    prefer_spelling,
)
from neardup_spark.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def test_conf_default_yaml_mirrors_the_dataclass_defaults():
    data = yaml.safe_load((REPO / "conf" / "default.yaml").read_text())
    assert data == default_settings_dict()


def test_default_banding_is_derived():
    config = build_config()
    assert (config.banding.bands, config.banding.rows) == (28, 7)
    assert (config.to_dict()["bands"], config.to_dict()["rows"]) == (28, 7)


def test_layers_later_wins(tmp_path):
    first = tmp_path / "a.yaml"
    first.write_text("threshold: 0.9\nngram: 3\nspark:\n  spark.driver.memory: 3g\n")
    job = load_settings(
        [str(first)],
        ["ngram=4", "normalize.casefold=false", "spark.sql.shuffle.partitions=7"],
        {"seed": 5},
    )
    config = job.dedupe
    assert config.threshold == 0.9 and config.ngram == 4 and config.seed == 5
    assert config.normalize.casefold is False and config.normalize.nfkc is True
    assert job.session.spark == {"spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "7"}


def test_explicit_bands_and_rows():
    config = build_config(options={"bands": 20, "rows": 10})
    assert (config.banding.bands, config.banding.rows) == (20, 10)


@pytest.mark.parametrize(
    ("overrides", "options", "message"),
    [
        (["nope=1"], {}, "unknown setting 'nope'"),
        (["normalize.bogus=1"], {}, "unknown setting normalize.bogus"),
        ([], {"threshold": 1.5}, "threshold must be in"),
        ([], {"bands": 30, "rows": 10}, "must be >= 1 each and fit"),
        ([], {"bands": 30}, "give both --bands and --rows"),
        ([], {"ngram": 0}, "ngram must be a positive integer"),
        (["representative=biggest"], {}, "representative must be one of"),
        (["missing-equals"], {}, "--set expects key=value"),
        (["boilerplate.bogus=1"], {}, "unknown setting boilerplate.bogus"),
        (["boilerplate.unit=sentence"], {}, "boilerplate.unit must be one of line, paragraph"),
        (["boilerplate.mode=first"], {}, "boilerplate.mode must be one of template, repeats"),
        (["boilerplate.min_docs=1"], {}, "boilerplate.min_docs must be an integer >= 2"),
        (["boilerplate.min_words=0"], {}, "boilerplate.min_words must be an integer >= 1"),
        (["boilerplate.prefer=quality"], {}, "orders occurrences in --mode repeats only"),
        (
            ["boilerplate.mode=repeats", "boilerplate.prefer=quality upwards"],
            {},
            "prefer takes .COLUMN .asc.desc.",
        ),
    ],
)
def test_bad_settings_are_user_errors(overrides, options, message):
    with pytest.raises(UserError, match=message):
        build_config(overrides=overrides, options=options)


@pytest.mark.parametrize(
    "text, keys",
    [
        ("quality desc, fetch_date", (("quality", True), ("fetch_date", False))),
        ("meta.score DESC,a[0]", (("meta.score", True), ("a[0]", False))),
        ("we`ird asc", (("we`ird", False),)),
        ("größe, 名前 desc", (("größe", False), ("名前", True))),
        ("`fetch date` desc, `note, desc`", (("fetch date", True), ("note, desc", False))),
        ("`we``ird` desc", (("we`ird", True),)),
        ("```x```", (("`x`", False),)),
        ("desc desc", (("desc", True),)),
    ],
)
def test_prefer_names_are_taken_as_they_are_backticks_around_spaces_and_commas(text, keys):
    assert parse_prefer(text) == keys
    spelled = ", ".join(prefer_spelling(name) + (" desc" if desc else "") for name, desc in keys)
    assert parse_prefer(spelled) == keys


@pytest.mark.parametrize(
    "text, message",
    [
        ("`fetch date desc", "no closing backtick"),
        ("`a`desc", "no closing backtick"),
        ("fetch date desc", 'prefer takes "COLUMN'),
        ("quality,", 'prefer takes "COLUMN'),
        ("``", 'prefer takes "COLUMN'),
        ("", 'prefer takes "COLUMN'),
    ],
)
def test_prefer_syntax_errors_are_user_errors(text, message):
    with pytest.raises(UserError, match=message):
        parse_prefer(text)


def test_a_missing_prefer_name_hints_at_backticks():
    assert prefer_hint("note", ["id", "note, desc"]) == " (in --prefer, write `note, desc`)"
    assert prefer_hint("note", ["id", "notes"]) == ""


def test_column_names_must_be_text():
    with pytest.raises(UserError, match="id_col must be a column name, got 2026"):
        build_config(overrides=["id_col=2026"])
    assert build_config(overrides=['id_col="2026"', "text_col=body text"]).id_col == "2026"


@pytest.mark.parametrize("module", ["", ".prefer", ".dedupe", ".layers", ".settings"])
def test_doctests(module):
    """Each module of the config package (``testmod`` of the package sees only its
    ``__init__``); the prefer syntax's examples run."""
    found = importlib.import_module(f"neardup_spark.config{module}")
    result = doctest.testmod(found)
    assert result.failed == 0
    assert result.attempted > 0 or module != ".prefer"


def test_missing_config_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="config file not found"):
        build_config([str(tmp_path / "nope.yaml")])


def test_parse_override_types():
    assert parse_override("threshold=0.85") == {"threshold": 0.85}
    assert parse_override("bands=null") == {"bands": None}
    assert parse_override("spark.driver.memory=4g") == {"spark": {"spark.driver.memory": "4g"}}


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DedupeConfig().threshold = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[3]", 3), ("local[4,2]", 4), ("local[ 2 ]", 2), ("local[0]", 1)],
)
def test_local_cores_of_a_master(master, cores):
    from neardup_spark.runtime.engine import local_cores

    assert local_cores(master) == cores


def test_local_star_uses_every_cpu():
    import os

    from neardup_spark.runtime.engine import local_cores

    assert local_cores("local[*]") == os.cpu_count()
    assert local_cores("local[*,3]") == os.cpu_count()


def test_boilerplate_settings_layer_and_enter_the_settings_digest():
    plain = build_config()
    assert not plain.strip_boilerplate and plain.boilerplate.mode == "template"
    config = build_config(
        overrides=["boilerplate.min_docs=7", "boilerplate.group_col=host"],
        options={"strip_boilerplate": True},
    )
    assert config.strip_boilerplate
    assert (config.boilerplate.min_docs, config.boilerplate.group_col) == (7, "host")
    assert config.boilerplate.unit == plain.boilerplate.unit  # untouched keys keep defaults
    assert config.settings_json() != plain.settings_json()
    assert '"min_docs": 7' in config.settings_json()
    assert DedupeConfig.from_dict(config.to_dict()).boilerplate == config.boilerplate
    repeats = build_config(
        overrides=["boilerplate.mode=repeats", "boilerplate.prefer=quality desc, fetched"]
    )
    assert repeats.boilerplate.prefer_order == (("quality", True), ("fetched", False))
