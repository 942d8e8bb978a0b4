"""HTML -> text with Resiliparse: the main content (``--extract main``) or all visible text
(``--extract text``). Pure, run on the executors (and by ``neardup eval-extract``)."""

from __future__ import annotations

from resiliparse.extract.html2text import extract_plain_text


def extract_text(html: str, mode: str) -> str:
    """Visible text of an HTML document: main content (``"main"``: without image alt texts and
    comment sections) or all of it (``"text"``)."""
    if mode == "main":
        return extract_plain_text(html, main_content=True, alt_texts=False, comments=False)
    return extract_plain_text(html, main_content=False, alt_texts=False)
