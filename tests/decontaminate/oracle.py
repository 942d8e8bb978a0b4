"""A brute-force oracle of contamination matching: Python strings, tuples of words, no hashes."""

from __future__ import annotations

import re
import unicodedata


def oracle_words(text: str) -> list[tuple[str, int, int]]:
    """``(casefolded word, start, end)`` of each word: a run of non-whitespace, stripped of
    punctuation and symbols at both ends (BMP characters of categories P* and S*)."""

    def punct(ch: str) -> bool:
        return ord(ch) < 0x10000 and unicodedata.category(ch)[0] in "PS"

    out = []
    for m in re.finditer(r"\S+", text):
        start, end = m.start(), m.end()
        while start < end and punct(text[start]):
            start += 1
        while end > start and punct(text[end - 1]):
            end -= 1
        if start < end:
            out.append((text[start:end].casefold(), start, end))
    return out


def oracle_spans(doc: str, item: str, n: int) -> tuple[int, list[tuple[int, int]]]:
    """``(distinct grams of the item found, merged spans)`` of ``item`` in ``doc``."""
    words = oracle_words(doc)
    item_words = [w for w, _, _ in oracle_words(item)]
    k = min(n, len(item_words))
    grams = {tuple(item_words[i : i + k]) for i in range(len(item_words) - k + 1)}
    found, hits = set(), []
    for i in range(len(words) - k + 1):
        gram = tuple(w for w, _, _ in words[i : i + k])
        if gram in grams:
            found.add(gram)
            hits.append((i, i + k - 1))
    spans: list[list[int]] = []
    for first, last in hits:
        if spans and first <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
    return len(found), [(words[a][1], words[b][2]) for a, b in spans]
