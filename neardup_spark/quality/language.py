"""The synthetic language of generated corpora: its vocabulary, token format and rendering.

Pseudo-words built from syllables (:data:`VOCAB_SIZE` of them, one to four syllables; short
words are the frequent ones, a few are capitalised names), drawn with Zipf's law (exponent
:data:`ZIPF_EXPONENT`); the same vocabulary for every corpus seed. A document is held as
tokens, a word index and a format byte each (case, punctuation, separator), and turned into
text by :func:`render`, all in Arrow. The boilerplate blocks (navigation, cookie notices,
copyright lines) are extra vocabulary entries rendered whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

VOCAB_SIZE = 30_000
ZIPF_EXPONENT = 1.1

# --- token formatting ----------------------------------------------------------------------
# A token is a word index and a format byte: case << 5 | punctuation << 2 | separator.
# The rendered token is the word in that case, then the punctuation, then the separator.
CASE_SHIFT = 5
LOWER, CAPITAL, UPPER = 0, 1, 2
PUNCTUATION = ("", ",", ".", "!", "?", ";", ":", "...")
NO_PUNCT, COMMA, PERIOD, BANG, QUESTION, SEMICOLON, COLON, ELLIPSIS = range(8)
SEPARATORS = (" ", "\n\n", "", "")
SPACE, PARAGRAPH, END = 0, 1, 2
PUNCT_MASK = np.uint8(0b11100)
SEP_MASK = np.uint8(0b11)

# --- vocabulary ----------------------------------------------------------------------------
_VOCAB_SEED = 20_240_611  # the language is the same for every corpus seed


def _parts(spec: str) -> tuple[str, ...]:
    """Space-separated syllable parts; ``-`` is the empty part."""
    return tuple(part.strip("-") for part in spec.split())


# Repeats weight a part: an empty onset or coda is common, plain vowels more than diphthongs.
_ONSETS = _parts("- - b c d f g h j k l m n p r s t v w y z bl br ch cl cr dr fr gl gr pl pr sh")
_ONSETS += _parts("sk sl sp st th tr wh")
_NUCLEI = _parts("a e i o u a e i o a e ai ea ee ie oa ou oo y")
_CODAS = _parts("- - - - - - n r s l m t d nd nt st ng rk ck x th")
_SYLLABLE_WEIGHTS = (0.2, 0.4, 0.28, 0.12)  # of 1, 2, 3, 4 syllables
_LENGTH_NOISE = 1.5  # letters, on the length that orders words by frequency
_NAME_FRACTION = 0.03  # of words past the most frequent 200, always capitalised
_ZIPF_GUIDE_BITS = 16

BOILERPLATE_HEADERS = (
    "Home | News | Sport | Business | Culture | Travel | Weather. Sign in to your account or "
    "register for free to save articles, follow topics and get our daily newsletter.",
    "Skip to main content. Menu: Home, Products, Solutions, Pricing, Resources, Blog, About "
    "us, Contact. Search this site. Free shipping on all orders over 50 euros this week only!",
    "This website uses cookies to improve your experience. By continuing to browse the site "
    "you agree to our use of cookies. Accept all | Reject all | Manage preferences.",
    "You are here: Home > Community > Forums > General discussion. Welcome, guest! Please log "
    "in or register to post replies, follow threads and receive notifications.",
)
BOILERPLATE_FOOTERS = (
    "Copyright 2024 Example Media Group. All rights reserved. Privacy policy | Terms of use | "
    "Cookie settings | Accessibility | Contact us | Advertise with us | Careers | Sitemap.",
    "Share this article: Facebook, Twitter, LinkedIn, Email, Print. Related posts: ten tips for "
    "a better morning routine; how to save money on groceries; the best hiking trails near you.",
    "Subscribe to our newsletter and never miss an update. Enter your email address below. We "
    "respect your privacy and you can unsubscribe at any time. Powered by WordPress. Back to top.",
    "Leave a comment. Your email address will not be published. Required fields are marked. "
    "Name, Email, Website. Save my name in this browser for the next time I comment. Post it.",
)


@dataclass(frozen=True)
class Language:
    """The vocabulary, its rendering tables and a Zipf sampler over it.

    Word ``w`` (``0 <= w < VOCAB_SIZE``, rank order: 0 is the most frequent) in case ``c`` is
    ``cased[c * n_entries + w]``; entries past the vocabulary are the boilerplate blocks, the
    same in every case.
    """

    words: tuple[str, ...]
    cased: pa.Array  # 3 * n_entries strings
    n_entries: int
    cdf: np.ndarray  # float64, Zipf cumulative probabilities by rank
    guide_lo: np.ndarray  # int32: the rank of every u in bucket b, when guide_pure[b]
    guide_pure: np.ndarray  # bool

    @property
    def header_base(self) -> int:
        return len(self.words)

    @property
    def footer_base(self) -> int:
        return len(self.words) + len(BOILERPLATE_HEADERS)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` Zipf-distributed word indices (int32): a guide table, then binary search for
        the few draws that fall in a bucket spanning several words."""
        u = rng.random(n)
        bucket = (u * (1 << _ZIPF_GUIDE_BITS)).astype(np.int32)
        out = self.guide_lo[bucket]
        mixed = np.flatnonzero(~self.guide_pure[bucket])
        out[mixed] = np.searchsorted(self.cdf, u[mixed], side="right")
        return out


def _pseudo_words(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct pseudo-words in frequency-rank order: shorter ones first, with noise."""
    syllables = [o + v + c for o in _ONSETS for v in _NUCLEI for c in _CODAS]
    words: dict[str, float] = {}
    while len(words) < n:
        m = 2 * n
        lengths = rng.choice(4, size=m, p=_SYLLABLE_WEIGHTS) + 1
        picks = rng.integers(0, len(syllables), size=(m, 4))
        noise = rng.normal(0.0, _LENGTH_NOISE, size=m)
        for length, row, z in zip(lengths.tolist(), picks.tolist(), noise.tolist(), strict=True):
            word = "".join(syllables[s] for s in row[:length])
            if word not in words:
                words[word] = len(word) + z
    ranked = sorted(words, key=words.__getitem__)
    return ranked[:n]


@lru_cache(maxsize=1)
def language() -> Language:
    """The (cached) vocabulary of every generated corpus."""
    rng = np.random.default_rng(_VOCAB_SEED)
    words = _pseudo_words(rng, VOCAB_SIZE)
    names = rng.random(VOCAB_SIZE) < _NAME_FRACTION
    names[:200] = False
    lower = [w.capitalize() if is_name else w for w, is_name in zip(words, names, strict=True)]
    blocks = list(BOILERPLATE_HEADERS + BOILERPLATE_FOOTERS)
    cased = (
        lower
        + blocks
        + [w.capitalize() for w in words]
        + blocks
        + [w.upper() for w in words]
        + blocks
    )
    weights = np.arange(1, VOCAB_SIZE + 1, dtype=np.float64) ** -ZIPF_EXPONENT
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    edges = np.arange((1 << _ZIPF_GUIDE_BITS) + 1, dtype=np.float64) / (1 << _ZIPF_GUIDE_BITS)
    lo = np.searchsorted(cdf, edges[:-1], side="right")
    hi = np.searchsorted(cdf, edges[1:], side="left")
    return Language(
        words=tuple(words),
        cased=pa.array(cased, type=pa.string()),
        n_entries=VOCAB_SIZE + len(blocks),
        cdf=cdf,
        guide_lo=lo.astype(np.int32),
        guide_pure=lo == hi,
    )


_ENDINGS = pa.array(
    [PUNCTUATION[p] + SEPARATORS[s] for p in range(len(PUNCTUATION)) for s in range(4)],
    type=pa.string(),
)


def render(lang: Language, words: np.ndarray, fmt: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Texts of documents given as tokens in CSR layout (doc ``d`` owns tokens
    ``offsets[d]:offsets[d+1]``); all in Arrow, no Python string per token."""
    entry = (fmt >> CASE_SHIFT).astype(np.int64) * lang.n_entries + words
    tokens = pc.binary_join_element_wise(
        lang.cased.take(pa.array(entry)), _ENDINGS.take(pa.array(fmt & np.uint8(31))), ""
    )
    lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), tokens)
    return pc.binary_join(lists, "")
