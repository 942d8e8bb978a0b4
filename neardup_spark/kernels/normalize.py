"""Text normalisation before shingling, on whole Arrow arrays of documents.

Steps, each switchable in :class:`NormalizeOptions`:

1. Unicode NFKC (compatibility forms: full-width letters, ligatures, non-breaking spaces);
2. case folding (Python's ``str.casefold``: ``"Straße"`` -> ``"strasse"``); ASCII text takes a
   vectorised fast path with the same result;
3. punctuation and symbols become spaces (every character that is not a letter, digit, mark or
   whitespace), so ``"don't"`` is two words, ``don`` and ``t``;
4. whitespace: runs of Unicode whitespace separate words; leading and trailing whitespace go.

Null stays null. The same function serves the Spark job (one call per Arrow batch) and single
texts (:func:`normalize_text`), so both always agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

# RE2 syntax (Arrow's regex engine): anything but letters, numbers, marks and whitespace.
PUNCTUATION_PATTERN = r"[^\p{L}\p{N}\p{M}\s]+"
WHITESPACE_PATTERN = r"\s\s+|[^\S ]"


@dataclass(frozen=True)
class NormalizeOptions:
    """Which normalisation steps run before words are split."""

    nfkc: bool = True
    casefold: bool = True
    strip_punctuation: bool = True
    collapse_whitespace: bool = True


DEFAULT_OPTIONS = NormalizeOptions()


def _casefold(texts: pa.Array) -> pa.Array:
    """Full Unicode case folding; ASCII strings use Arrow's vectorised lower-casing."""
    lowered = pc.ascii_lower(texts)
    is_ascii = pc.string_is_ascii(texts)
    if pc.all(pc.fill_null(is_ascii, True)).as_py():
        return lowered
    # Non-ASCII documents go through Python's casefold, which Arrow lacks (ß -> ss, ς -> σ).
    folded = [
        None if s is None else (s.lower() if a else s.casefold())
        for s, a in zip(texts.to_pylist(), is_ascii.to_pylist(), strict=True)
    ]
    return pa.array(folded, type=texts.type)


def normalize_texts(texts: pa.Array, options: NormalizeOptions = DEFAULT_OPTIONS) -> pa.Array:
    """Normalise an Arrow string array; returns an array of the same length and type.

    >>> normalize_texts(pa.array(["The  Crawler, fetches!", None, "Straße"])).to_pylist()
    ['the crawler fetches', None, 'strasse']
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    out = texts
    if options.nfkc:
        out = pc.utf8_normalize(out, form="NFKC")
    if options.casefold:
        out = _casefold(out)
    if options.strip_punctuation:
        out = pc.replace_substring_regex(out, pattern=PUNCTUATION_PATTERN, replacement=" ")
    if options.collapse_whitespace:
        # Only runs of 2+ whitespace and single non-space whitespace characters need rewriting;
        # matching every single space instead (``\s+``) costs 7x more.
        out = pc.replace_substring_regex(out, pattern=WHITESPACE_PATTERN, replacement=" ")
        out = pc.utf8_trim_whitespace(out)
    return out


def normalize_text(text: str | None, options: NormalizeOptions = DEFAULT_OPTIONS) -> str | None:
    """Normalise one text with exactly the batch code path.

    >>> normalize_text("Ａ rose, is a ROSE.")
    'a rose is a rose'
    """
    return normalize_texts(pa.array([text], type=pa.large_string()), options)[0].as_py()
