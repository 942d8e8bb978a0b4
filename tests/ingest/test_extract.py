"""HTML -> text: the main content, or all visible text."""

from __future__ import annotations

from neardup_spark.ingest.extract import extract_text

HTML = (
    "<!doctype html><html><head><title>t</title></head><body>"
    "<nav><ul><li>Home</li><li>News</li><li>Subscribe</li></ul></nav>"
    "<main><article><h1>Bridge</h1><p>The harbour town rebuilt its old stone bridge after the "
    "winter floods. Engineers from three cities worked for eleven months on the arches.</p>"
    '<img src="x.png" alt="a photo of the arches"></article></main>'
    "<footer>Copyright 2024 Example Media.</footer></body></html>"
)


def test_main_drops_the_navigation_and_text_keeps_it():
    main, text = extract_text(HTML, "main"), extract_text(HTML, "text")
    assert "stone bridge" in main and "stone bridge" in text
    assert "Subscribe" not in main
    assert "Subscribe" in text
    assert "a photo of the arches" not in main and "a photo of the arches" not in text
