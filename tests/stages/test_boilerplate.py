"""Boilerplate stages on hand-made pages: exact document counts per unit (and per group), the
keeper of repeats mode (smallest id, or the prefer order), the cleaned rows by broadcast and by
join, CJK and empty lines, and independence from the partitioning."""

from __future__ import annotations

import functools
from collections import Counter, defaultdict

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.batch.boilerplate import BoilerplateSet
from neardup_spark.columns import BOILERPLATE_CHARS, BOILERPLATE_UNITS, KEEPER, UNIT_DOCS, UNIT_KEY
from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.kernels.boilerplate import UNIT_HASH_SEED, unit_features, unit_keys
from neardup_spark.kernels.compiled_words import string_hashes
from neardup_spark.stages.boilerplate import (
    boilerplate_units,
    check_boilerplate_columns,
    drop_lists,
    stripped_schema,
    stripped_texts,
)

NAV = "Home | News | Sport | Weather"
MOST_READ = "Most read: the mayor resigns today"
FOOTER = "© 2024 Daily Example. All rights reserved."
QUOTE = "We will rebuild the bridge, the minister said."

# (id, site, text, quality): two sites' templates, a quote on three sites, CJK, empty lines.
PAGES = [
    ("p01", "a", f"{NAV}\n{MOST_READ}\nFirst story body with several words.\n{FOOTER}", 3),
    ("p02", "a", f"{NAV}\n{MOST_READ}\nSecond story body, other words here.\n\n{FOOTER}", 5),
    ("p03", "a", f"{NAV}\n{QUOTE}\nThird story on site a, new words.\n{FOOTER}\n", None),
    ("p04", "a", f"{NAV.upper()}\n{MOST_READ}\n{FOOTER}", 1),
    ("p05", "b", f"Menu: Start Politics Culture\n{QUOTE}\nA story on b.\n{FOOTER}", 9),
    ("p06", "b", f"Menu: Start Politics Culture\nAnother story on site b.\n{FOOTER}", 9),
    ("p07", "b", f"Menu: Start Politics Culture\n\n\nThird b story, own words.\n{FOOTER}", 2),
    ("p08", "c", f"{QUOTE}\n首页 新闻 体育\n这是一篇关于天气的文章。\n版权所有 新华网", 4),
    ("p09", "c", "首页 新闻 体育\n另一篇文章的内容。\n版权所有 新华网", None),
    ("p10", "c", "首页 新闻 体育\n第三篇文章。\n版权所有 新华网\n", 7),
    ("p11", "c", None, 1),
    ("p12", "c", "", 1),
    ("p13", "c", "\n\n  \n", 1),
    ("p14", "a", f"{NAV}\nHome\nHome\n{MOST_READ}\n{MOST_READ}", 8),
]


@pytest.fixture(scope="module")
def pages(spark):
    schema = "id string, site string, text string, quality int"
    return spark.createDataFrame(PAGES, schema).repartition(3).cache()


def config_of(**options):
    return build_config(options={"boilerplate": {"min_docs": 3, **options}})


def brute_force_counts(config, by_group=False):
    """Documents per unit key, by brute force over the pages (kernels for the keys only)."""
    docs: defaultdict[int, set[str]] = defaultdict(set)
    for doc_id, site, text, _ in PAGES:
        if not text:
            continue
        features = unit_features(pa.array([text]), config.boilerplate.unit)
        salts = None
        if by_group:
            salts = string_hashes(pa.array([site]), UNIT_HASH_SEED)
        keys = unit_keys(features.hashes, np.zeros(features.units.count, dtype=np.int64), salts)
        for key, tokens in zip(keys.tolist(), features.tokens.tolist(), strict=True):
            if tokens >= config.boilerplate.min_words:
                docs[np.uint64(key).view(np.int64).item()].add(doc_id)
    return docs


def units_table(df, config):
    rows = df.transform(boilerplate_units(config)).collect()
    return {row[UNIT_KEY]: row for row in rows}


@pytest.mark.parametrize("by_group", [False, True])
def test_template_counts_are_exact(pages, by_group):
    config = config_of(group_col="site" if by_group else None)
    found = units_table(pages, config)
    expected = {k: len(v) for k, v in brute_force_counts(config, by_group).items() if len(v) >= 3}
    assert {k: row[UNIT_DOCS] for k, row in found.items()} == expected
    # The navigation (5 pages on a, the upper-case one included), most-read (4 on a: twice in
    # p14 counts once), footer (4 on a, 3 on b: 7), menu (3 on b), CJK nav and footer (3 on c);
    # the quote (3 sites) only without the site grouping.
    counts = sorted(row[UNIT_DOCS] for row in found.values())
    assert counts == ([3, 3, 3, 3, 4, 4, 5] if by_group else [3, 3, 3, 3, 4, 5, 7])


def test_repeats_keeper_is_the_smallest_id_or_the_prefer_order(pages):
    smallest = units_table(pages, config_of(mode="repeats"))
    expected = brute_force_counts(config_of(mode="repeats"))
    assert {k: r[KEEPER] for k, r in smallest.items()} == {
        k: min(v) for k, v in expected.items() if len(v) >= 2
    }
    preferred = units_table(pages, config_of(mode="repeats", prefer="quality desc, site"))
    quality = {p[0]: p[3] for p in PAGES}
    site = {p[0]: p[1] for p in PAGES}

    def first(ids):  # quality descending, nulls last, then site, then id
        return min(ids, key=lambda d: (quality[d] is None, -(quality[d] or 0), site[d], d))

    assert {k: r[KEEPER] for k, r in preferred.items()} == {
        k: first(v) for k, v in expected.items() if len(v) >= 2
    }


def test_missing_group_or_prefer_column_is_a_user_error(pages):
    with pytest.raises(UserError, match="the group column 'host' is not in the input"):
        check_boilerplate_columns(pages, config_of(group_col="host"))
    with pytest.raises(UserError, match="the prefer column 'score'"):
        check_boilerplate_columns(pages, config_of(mode="repeats", prefer="score desc"))


def _set_of(table, config):
    keys = np.array(sorted(np.int64(k).view(np.uint64) for k in table), dtype=np.uint64)
    keepers = None
    if config.boilerplate.mode == "repeats":
        by_key = {np.int64(k).view(np.uint64).item(): row[KEEPER] for k, row in table.items()}
        keepers = pa.array([by_key[int(k)] for k in keys])
    return BoilerplateSet(keys, keepers)


def _constant(value):
    return value


def cleaned(pages, config, joined):
    table = units_table(pages, config)
    found = _set_of(table, config)
    provider = functools.partial(
        _constant, BoilerplateSet(np.zeros(0, np.uint64)) if joined else found
    )
    drops = None
    if joined:
        table_df = pages.transform(boilerplate_units(config))
        drops = pages.transform(drop_lists(config, table_df))
    out = pages.transform(stripped_texts(config, "id", "text", provider, drops))
    return {row["id"]: row for row in out.collect()}, out


@pytest.mark.parametrize("mode", ["template", "repeats"])
def test_cleaned_rows_by_broadcast_equal_by_join(pages, mode):
    config = config_of(mode=mode, group_col="site" if mode == "template" else None)
    broadcast, df = cleaned(pages, config, joined=False)
    joined, _ = cleaned(pages, config, joined=True)
    assert broadcast == joined
    assert df.schema == stripped_schema(pages)
    assert [f.name for f in df.schema][:4] == ["id", "site", "text", "quality"]
    assert sorted(broadcast) == sorted(p[0] for p in PAGES)  # every row kept


def test_template_mode_removes_every_occurrence(pages):
    rows, _ = cleaned(pages, config_of(), joined=False)
    assert rows["p01"]["text"] == "First story body with several words.\n"
    assert rows["p02"]["text"] == "Second story body, other words here.\n\n"
    assert rows["p04"]["text"] == ""  # all boilerplate: kept, emptied, counted
    assert rows["p04"][BOILERPLATE_UNITS] == 3 and rows["p04"]["__neardup_emptied"]
    # "Home" (one word) is never removed; the most-read line goes twice.
    assert rows["p14"]["text"] == "Home\nHome\n"
    assert rows["p08"]["text"] == "这是一篇关于天气的文章。\n"  # the quote is on three sites
    assert rows["p11"]["text"] is None and rows["p12"]["text"] == ""
    assert rows["p13"]["text"] == "\n\n  \n" and rows["p13"][BOILERPLATE_UNITS] == 0
    for doc_id, _, text, _ in PAGES:
        row = rows[doc_id]
        before = len(text or "")
        assert len(row["text"] or "") == before - row[BOILERPLATE_CHARS]


def test_repeats_mode_keeps_the_first_occurrence(pages):
    rows, _ = cleaned(pages, config_of(mode="repeats"), joined=False)
    # p01 has the smallest id: it keeps its navigation, most-read and footer lines.
    assert rows["p01"]["text"] == PAGES[0][2]
    assert rows["p02"]["text"] == "Second story body, other words here.\n\n"
    assert rows["p03"]["text"] == f"{QUOTE}\nThird story on site a, new words.\n"
    # The repeated most-read line of p14 goes in p14 too (its first is in p01).
    assert rows["p14"]["text"] == "Home\nHome\n"
    # p05 is the quote's second page; p08 the CJK template's first, p09 and p10 lose it.
    assert rows["p08"]["text"] == "首页 新闻 体育\n这是一篇关于天气的文章。\n版权所有 新华网"
    assert rows["p09"]["text"] == "另一篇文章的内容。\n"


def test_a_unit_repeated_within_one_document_keeps_its_first_occurrence(spark):
    df = spark.createDataFrame(
        [("x", "Line one of words\nother text here\nLine one of words\n")], "id string, text string"
    )
    rows, _ = cleaned(df, config_of(mode="repeats"), joined=False)
    assert rows["x"]["text"] == "Line one of words\nother text here\n"


def test_counts_do_not_depend_on_the_partitioning(spark, pages):
    config = config_of(mode="repeats", prefer="quality desc")
    reference = units_table(pages, config)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "2")
    try:
        for parts in (1, 5):
            assert units_table(pages.repartition(parts), config) == reference
    finally:
        spark.conf.set(key, before)


def test_binary_text_stays_binary(spark):
    df = spark.createDataFrame(
        [(f"d{i}", f"{NAV}\nbody {i} of the page\n".encode()) for i in range(4)],
        "id string, text binary",
    )
    rows, out = cleaned(df, config_of(), joined=False)
    assert out.schema["text"].dataType.simpleString() == "binary"
    assert rows["d0"]["text"] == b"body 0 of the page\n"
    assert Counter(r[BOILERPLATE_UNITS] for r in rows.values()) == {1: 4}
