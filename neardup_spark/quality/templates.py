"""A generated site-template corpus (``neardup generate DIR --templates``): article bodies
placed in the page templates of a few dozen sites, some articles on two sites, with the truth
of which lines are template and which documents are cross-site copies.

Sites (about one per :data:`PAGES_PER_SITE` pages, sizes drawn log-normal)
    Each has a name, 1-3 navigation lines (``Home | World | Sport ...``, an account line, a
    tag line), a "most read" block (a heading and 5 headlines taken from the site's 8-12
    current ones: the block rotates, so each headline is on about half of the site's pages),
    and a 2-4 line footer. Names, navigation, tag lines and headlines are each site's own;
    the account lines, the footer's link lines and the headings ("Most read") come from short
    lists that sites share, as real sites share such wording.

Pages
    ``navigation``, blank line, the article body (paragraphs separated by blank lines, from
    :mod:`~neardup_spark.quality.documents`), blank line, the most-read block, blank line,
    the footer. Bodies are generated text (:mod:`~neardup_spark.quality.language`) of about
    ``mean_words`` words.

Cross-site copies
    :data:`CROSS_SITE_FRACTION` of the pages (one in 13.5, as in the issue's 800 of 10,800)
    carry the body of an article published on another site: the same body in the other site's
    template.

Tables written (``write_template_corpus``)
    ``corpus/``: ``id``, ``site``, ``url``, ``text`` (ids as ``neardup generate``'s, in a
    shuffled order); ``truth/``: one row per cross-site pair, ``doc_a < doc_b``, ``kind``
    (``cross_site``), ``jaccard`` (of the two bodies, 1.0: what a dedupe should see once the
    templates are gone), as ``neardup evaluate --truth`` reads it; ``lines/``: per document its
    ``body`` and its ``template`` lines (list of strings).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.ownership import claim_to_replace, write_ownership
from neardup_spark.quality.documents import original_tokens, structure
from neardup_spark.quality.generate import written_by_generate
from neardup_spark.quality.language import Language, language, render

PAGES_PER_SITE = 180
CROSS_SITE_FRACTION = 800 / 10_800
MIN_ID_DIGITS = 7
ROW_GROUP_ROWS = 5000
SECTIONS = (
    *("World", "Politics", "Business", "Sport", "Culture", "Science", "Travel", "Opinion"),
    *("Weather", "Health", "Tech", "Style", "Video", "Local", "Money", "Education"),
    *("Environment", "Food", "Books", "Music", "Film", "Cars", "Property", "Jobs"),
)
SEPARATORS = (" | ", " · ", " / ", "  ", " - ")
ACCOUNT_LINES = (
    "Subscribe | Sign in | Search",
    "Log in | Register | Newsletter",
    "Search the site | My account | Help",
    "Sign up for our daily newsletter",
)
HEADINGS = ("Most read", "Most popular", "Trending now", "Popular this week", "Editors' picks")
NAME_SUFFIXES = ("Herald", "Times", "Post", "Daily", "Gazette", "Courier", "Observer", "Tribune")
FOOTER_LINES = (
    "About us | Contact | Privacy policy | Terms of use | Cookies",
    "Follow us on Facebook, Twitter and Instagram",
    "Advertise with us | Careers | Accessibility | Sitemap",
)
CORPUS_SCHEMA = pa.schema(
    [("id", pa.string()), ("site", pa.string()), ("url", pa.string()), ("text", pa.string())]
)
TRUTH_SCHEMA = pa.schema(
    [
        ("doc_a", pa.string()),
        ("doc_b", pa.string()),
        ("kind", pa.string()),
        ("jaccard", pa.float64()),
    ]
)
LINES_SCHEMA = pa.schema(
    [("id", pa.string()), ("body", pa.string()), ("template", pa.list_(pa.string()))]
)


@dataclass(frozen=True)
class Site:
    """One site's template."""

    host: str
    navigation: tuple[str, ...]
    heading: str
    headlines: tuple[str, ...]
    footer: tuple[str, ...]

    def template(self, page: int) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """The navigation, most-read block and footer of the site's ``page``-th page."""
        k = len(self.headlines)
        start = (page // 3) % k  # the block moves on every third page
        shown = tuple(self.headlines[(start + i) % k] for i in range(5))
        return self.navigation, (self.heading, *shown), self.footer


def _texts(rng: np.random.Generator, lang: Language, targets: np.ndarray) -> list[str]:
    """Generated texts of ``targets`` words each (whole sentences, paragraphs)."""
    st = structure(rng, targets.astype(np.int64))
    return render(lang, *original_tokens(rng, lang, st, 0, targets.size)).to_pylist()


def _name(rng: np.random.Generator, lang: Language) -> str:
    word = lang.words[int(rng.integers(200, 5000))]
    return f"The {word.capitalize()} {NAME_SUFFIXES[int(rng.integers(len(NAME_SUFFIXES)))]}"


def _site(rng: np.random.Generator, lang: Language, number: int) -> Site:
    name = _name(rng, lang)
    host = f"{name.split()[1].lower()}-{number}.example"
    sep = SEPARATORS[int(rng.integers(len(SEPARATORS)))]
    sections = rng.choice(len(SECTIONS), size=int(rng.integers(4, 8)), replace=False)
    navigation = [sep.join(["Home", *(SECTIONS[s] for s in sorted(sections))])]
    if rng.random() < 0.6:
        navigation.append(ACCOUNT_LINES[int(rng.integers(len(ACCOUNT_LINES)))])
    if rng.random() < 0.4:
        tag = _texts(rng, lang, np.array([7]))[0].rstrip(".!?")
        navigation.append(f"{name}: {tag.lower()}")
    headlines = [
        re.split(r"[.!?]", text)[0]
        for text in _texts(rng, lang, rng.integers(6, 13, size=int(rng.integers(8, 13))))
    ]
    year = 2015 + int(rng.integers(10))
    footer = [f"© {year} {name}. All rights reserved."]
    footer += [
        FOOTER_LINES[i]
        for i in sorted(rng.choice(len(FOOTER_LINES), size=int(rng.integers(1, 4)), replace=False))
    ]
    return Site(
        host=host,
        navigation=tuple(navigation),
        heading=HEADINGS[int(rng.integers(len(HEADINGS)))],
        headlines=tuple(headlines),
        footer=tuple(footer),
    )


def _page(site: Site, page: int, body: str) -> tuple[str, list[str]]:
    """A page's text and its template lines."""
    navigation, most_read, footer = site.template(page)
    blocks = ["\n".join(navigation), body, "\n".join(most_read), "\n".join(footer)]
    return "\n\n".join(blocks), [*navigation, *most_read, *footer]


def _cross_site_pairs(
    rng: np.random.Generator, site_of: np.ndarray, n_pairs: int
) -> tuple[np.ndarray, np.ndarray]:
    """``n_pairs`` pages that copy the body of as many other pages, each on another site than
    its source; no page is in two pairs."""
    order = rng.permutation(site_of.size)
    copies, pool = order[:n_pairs], list(order[n_pairs:].tolist())
    sources = np.empty(copies.size, dtype=np.int64)
    for i, copy in enumerate(copies.tolist()):
        j = i
        while site_of[pool[j]] == site_of[copy]:  # the next page of another site
            j += 1
        pool[i], pool[j] = pool[j], pool[i]
        sources[i] = pool[i]
    return copies, sources


def _site_sizes(rng: np.random.Generator, n_docs: int, pages_per_site: int) -> np.ndarray:
    n_sites = max(2, round(n_docs / pages_per_site)) if n_docs >= 2 else 1
    weights = rng.lognormal(0.0, 0.5, size=n_sites)
    return rng.multinomial(n_docs, weights / weights.sum())


def generate_template_corpus(
    n_docs: int, seed: int = 0, mean_words: int = 300, pages_per_site: int = PAGES_PER_SITE
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """``(corpus, truth, lines)`` as the module docstring describes; same arguments, same
    tables.

    >>> corpus, truth, lines = generate_template_corpus(400, seed=1, mean_words=60)
    >>> corpus.num_rows, truth.num_rows, len(set(corpus.column("site").to_pylist()))
    (400, 30, 2)
    """
    if n_docs < 0 or seed < 0 or mean_words < 1 or pages_per_site < 1:
        raise UserError("need docs >= 0, seed >= 0, mean words >= 1, pages per site >= 1")
    rng = np.random.default_rng(seed)
    lang = language()
    sizes = _site_sizes(rng, n_docs, pages_per_site)
    sites = [_site(rng, lang, i) for i in range(sizes.size)]
    site_of = np.repeat(np.arange(sizes.size), sizes)
    n_pairs = min(round(CROSS_SITE_FRACTION * n_docs), n_docs // 2) if sizes.size > 1 else 0
    copies, sources = _cross_site_pairs(rng, site_of, n_pairs)
    n_articles = n_docs - copies.size
    targets = np.clip(rng.lognormal(np.log(mean_words), 0.4, n_articles), 20, 8 * mean_words)
    bodies = _texts(rng, lang, np.rint(targets))
    article_of = np.full(n_docs, -1, dtype=np.int64)
    own = np.setdiff1d(np.arange(n_docs), copies)
    article_of[own] = np.arange(n_articles)
    article_of[copies] = article_of[sources]
    page_in_site = np.arange(n_docs) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    texts, templates = [], []
    for d in range(n_docs):
        text, template = _page(sites[site_of[d]], int(page_in_site[d]), bodies[article_of[d]])
        texts.append(text)
        templates.append(template)
    row_of = rng.permutation(n_docs)  # ids in a shuffled order: they say nothing
    width = max(MIN_ID_DIGITS, len(str(max(n_docs - 1, 0))))
    ids = np.array([f"doc-{r:0{width}d}" for r in row_of.tolist()], dtype=object)
    hosts = [sites[s].host for s in site_of.tolist()]
    urls = [f"https://{hosts[d]}/article/{article_of[d]}" for d in range(n_docs)]
    by_id = np.argsort(row_of)
    corpus = pa.table(
        [pa.array(a[by_id].tolist()) for a in (ids, np.array(hosts), np.array(urls))]
        + [pa.array([texts[d] for d in by_id])],
        schema=CORPUS_SCHEMA,
    )
    a, b = ids[copies], ids[sources]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    pair_order = np.lexsort((hi, lo))
    truth = pa.table(
        [
            pa.array(lo[pair_order].tolist(), pa.string()),
            pa.array(hi[pair_order].tolist(), pa.string()),
            pa.array(["cross_site"] * copies.size, pa.string()),
            pa.array(np.ones(copies.size)),
        ],
        schema=TRUTH_SCHEMA,
    )
    lines = pa.table(
        [
            corpus.column("id"),
            pa.array([bodies[article_of[d]] for d in by_id]),
            pa.array([templates[d] for d in by_id], pa.list_(pa.string())),
        ],
        schema=LINES_SCHEMA,
    )
    return corpus, truth, lines


def write_template_corpus(
    directory: str, n_docs: int, seed: int = 0, mean_words: int = 300, overwrite: bool = False
) -> dict[str, Any]:
    """Write ``DIRECTORY/corpus``, ``truth`` and ``lines`` (Parquet); returns a summary:
    ``docs``, ``sites``, ``truth_pairs``, ``template_lines``, ``seconds``."""
    started = time.perf_counter()
    root = Path(directory)
    parts = {name: root / name for name in ("corpus", "truth", "lines")}
    existing = [p for p in parts.values() if p.exists()]
    if existing and not overwrite:
        raise UserError(f"{existing[0]} already exists; pass --overwrite to replace it")
    storage = LocalStorage()
    record = claim_to_replace(storage, str(root), parts, "generate", written_by_generate)
    corpus, truth, lines = generate_template_corpus(n_docs, seed, mean_words)
    for path in existing:  # the job's own files (checked above)
        for file in path.glob("*"):
            file.unlink()
    for name, table in (("corpus", corpus), ("truth", truth), ("lines", lines)):
        parts[name].mkdir(parents=True, exist_ok=True)
        files = range(0, max(table.num_rows, 1), 20_000)
        record.files |= {f"{name}/part-{i:05d}.parquet" for i, _ in enumerate(files)}
        write_ownership(storage, str(root), record)  # listed before they are written
        for i, start in enumerate(files):
            pq.write_table(
                table.slice(start, 20_000),
                parts[name] / f"part-{i:05d}.parquet",
                row_group_size=ROW_GROUP_ROWS,
            )
    record.files = {f for f in record.files if (root / f).is_file()}
    write_ownership(storage, str(root), record)
    template_lines = sum(len(t) for t in lines.column("template").to_pylist())
    return {
        "docs": n_docs,
        "sites": len(set(corpus.column("site").to_pylist())),
        "truth_pairs": truth.num_rows,
        "template_lines": template_lines,
        "seconds": round(time.perf_counter() - started, 3),
    }


def template_removal(cleaned: pa.Table, lines: pa.Table, text_col: str = "text") -> dict[str, Any]:
    """How a cleaned corpus (``id``, ``text_col``) did against the truth ``lines``: template lines
    planted and removed, body characters and those kept (a line counts as kept when the cleaned
    page still holds it, as many times as the original did)."""
    cleaned_text = dict(
        zip(cleaned.column("id").to_pylist(), cleaned.column(text_col).to_pylist(), strict=True)
    )
    planted = removed = body_chars = kept_chars = 0
    for doc_id, body, template in zip(
        lines.column("id").to_pylist(),
        lines.column("body").to_pylist(),
        lines.column("template").to_pylist(),
        strict=True,
    ):
        left = Counter((cleaned_text.get(doc_id) or "").split("\n"))
        for line in template:
            planted += 1
            if left[line] > 0:
                left[line] -= 1
            else:
                removed += 1
        for line in body.split("\n"):
            body_chars += len(line)
            if left[line] > 0:
                left[line] -= 1
                kept_chars += len(line)
    return {
        "template_lines": planted,
        "template_lines_removed": removed,
        "template_removed_share": removed / planted if planted else None,
        "body_chars": body_chars,
        "body_chars_kept": kept_chars,
        "body_kept_share": kept_chars / body_chars if body_chars else None,
    }
