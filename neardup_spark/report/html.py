"""The run report page: ``OUTPUT/report.html``, self-contained (figures embedded as base64
PNGs; no network, no JavaScript). :func:`render_html` lays out the sections of
:func:`neardup_spark.report.data.report_data` with the figures of
:mod:`neardup_spark.report.figures`; :func:`write_report` writes the page of a finished run.
"""

from __future__ import annotations

import base64
import html
from typing import Any

from neardup_spark.io.finished import child
from neardup_spark.io.output import write_beside_run
from neardup_spark.io.storage import storage_for
from neardup_spark.report.boilerplate import boilerplate_html
from neardup_spark.report.data import COUNT_EXPLANATIONS, MAX_MEMBERS, TOP_CLUSTERS, report_data
from neardup_spark.report.figures import figure_pngs

REPORT_HTML = "report.html"

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em;
margin-top: 2em; } h3 { margin-bottom: 0.3em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.explain { color: #555; font-size: 0.93em; max-width: 50em; }
.bar { background: #1f77b4; height: 0.8em; display: inline-block; }
tr.rep td { background: #eef6ff; } tr.below td.sim { background: #fde7c8; font-weight: bold; }
tr.below td.bits { background: #fde7c8; font-weight: bold; }
td.snippet { font-family: Georgia, serif; font-size: 0.9em; max-width: 40em; }
img { max-width: 100%; border: 1px solid #eee; } code { background: #f4f4f4; padding: 0 0.2em; }
.muted { color: #888; } td.id { white-space: nowrap; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt_num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _e(value)


def _img(png: bytes, alt: str) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{encoded}">'


def _summary_html(data: dict[str, Any]) -> str:
    run, counts = data["run"], data["counts"]
    config = run["config"]
    settings = [
        ("method", run["method"]),
        ("input", run["input"]),
        ("output", run["output"]),
        ("id / text columns", f"{config.get('id_col')} / {config.get('text_col')}"),
        ("words per shingle (ngram)", config.get("ngram")),
    ]
    if run["method"] == "minhash":
        settings += [
            ("Jaccard threshold", config.get("threshold")),
            ("MinHash values (num_perm)", config.get("num_perm")),
            ("LSH bands x rows", f"{config.get('bands')} x {config.get('rows')}"),
        ]
    elif run["method"] == "simhash":
        settings += [
            ("max differing bits (hamming_k)", config.get("hamming_k")),
            ("blocks", config.get("blocks")),
        ]
    settings += [
        ("representative", config.get("representative")),
        ("wall time", f"{run['wall_seconds']:.1f} s"),
        ("throughput", f"{run['docs_per_second'] or 0:,.0f} documents/s"),
    ]
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in settings)
    count_rows = "".join(
        f'<tr><th>{_e(k)}</th><td class="num">{_fmt_num(v)}</td>'
        f'<td class="explain">{_e(COUNT_EXPLANATIONS.get(k, ""))}</td></tr>'
        for k, v in counts.items()
    )
    return (
        '<section id="summary"><h2>Run and counts</h2>'
        f"<table>{rows}</table>"
        '<p class="explain">How a run works: each document is normalised (case, punctuation, '
        "spacing) and cut into overlapping word sequences (shingles). Identical documents are "
        "found first by a fingerprint. The rest get a small sketch; an index proposes "
        "<em>candidate pairs</em> whose sketches collide, and each candidate is measured exactly "
        "and kept only if it reaches the threshold. Verified pairs are joined into clusters "
        "(connected components); one representative per cluster is kept.</p>"
        f'<table id="counts"><tr><th>count</th><th>value</th><th>meaning</th></tr>'
        f"{count_rows}</table></section>"
    )


def _stages_html(data: dict[str, Any]) -> str:
    stages = data["stages"]
    longest = max((s["seconds"] for s in stages), default=0.0) or 1.0
    rows = "".join(
        f"<tr><th>{_e(s['stage'])}</th><td class='num'>{s['seconds']:.2f}</td>"
        f"<td class='num'>{_fmt_num(s['share'] * 100 if s['share'] is not None else None, 1)}"
        f"</td><td><span class='bar' style='width:{200 * s['seconds'] / longest:.0f}px'>"
        "</span></td></tr>"
        for s in stages
    )
    total = sum(s["seconds"] for s in stages)
    return (
        '<section id="stages"><h2>Time per stage</h2>'
        "<table><tr><th>stage</th><th>seconds</th><th>% of wall</th><th></th></tr>"
        f"{rows}<tr><th>sum</th><td class='num'>{total:.2f}</td><td></td><td></td></tr></table>"
        '<p class="explain">Wall-clock seconds of each stage as the driver saw them. Spark is '
        "lazy, so a stage's time includes the work it was the first to need (e.g. reading "
        "the input). Start-up of Spark itself is not included.</p></section>"
    )


def _similarities_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    hist = data["similarity_histogram"]
    method = data["run"]["method"]
    extra = ""
    if data.get("hamming_counts"):
        cells = ", ".join(f"{d} bits: {c:,}" for d, c in data["hamming_counts"].items())
        extra = f" SimHash pairs by differing bits: {_e(cells)}."
    what = {
        "minhash": "the exact Jaccard coefficient of the two documents' shingle sets",
        "simhash": "cos(π·h/64), the cosine similarity implied by h differing SimHash bits",
        "exact": "1.0: the documents are identical after normalisation",
    }[method]
    return (
        '<section id="similarities"><h2>Similarity of verified pairs</h2>'
        f"{_img(pngs['similarities'], 'histogram of verified similarities')}"
        f'<p class="explain">Each verified pair of <code>pairs/</code> ({hist["total"]:,} in '
        f"all) counted by its similarity: for this {_e(method)} run, {_e(what)}. Exact copies "
        "sit at 1.0. Nothing lies left of the dashed threshold: those candidates were "
        "rejected. Many pairs just above the threshold suggest that moving it would change "
        f"the result a lot.{extra}</p></section>"
    )


def _cluster_sizes_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    dist = data["cluster_sizes"]
    singles = dist["clusters"][0] if dist["sizes"] and dist["sizes"][0] == 1 else 0
    return (
        '<section id="cluster-sizes"><h2>Cluster sizes</h2>'
        f"{_img(pngs['cluster_sizes'], 'cluster size distribution')}"
        f'<p class="explain">{dist["total_clusters"]:,} clusters hold '
        f"{dist['total_documents']:,} documents; {singles:,} documents have no duplicate "
        f"(size 1) and the largest cluster has {dist['largest']:,} members. The vertical axis "
        "is logarithmic, so a few large clusters stay visible next to thousands of singletons. "
        "An unexpectedly large cluster is worth a look below: it often means boilerplate "
        "(shared headers, templates) or a chain of pairs joining documents that differ.</p>"
        "</section>"
    )


def _removals_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    removals = data.get("removals")
    if not removals:
        return ""
    rule, removed = removals["cluster_rule"], removals["removed"]
    by_components = removals["removed_by_components"]
    rows = "".join(
        f"<tr><td>{_e(c['cluster_id'])}</td><td class='num'>{c['size']:,}</td></tr>"
        for c in removals["largest_clusters"]
    )
    similarity = removals.get("similarity")
    if similarity:
        edges = similarity["edges"]
        bins = "".join(
            f"<tr><td>{lo:.2f} - {hi:.2f}</td><td class='num'>{n:,}</td></tr>"
            for lo, hi, n in zip(edges[:-1], edges[1:], similarity["counts"], strict=True)
        )
        png = pngs.get("removals")
        figure = _img(png, "similarity of removed documents") if png else ""
        measured = (
            f"{figure}<table id='removal-similarity'><tr><th>similarity to the kept document</th>"
            f"<th>removed documents</th></tr>{bins}</table>"
        )
    else:
        measured = (
            '<p class="explain">Under the components rule a removed document need not have a '
            "verified pair with its kept one: no similarity is recorded for it.</p>"
        )
    return (
        '<section id="removals"><h2>What was removed</h2>'
        f"<table id='removed'><tr><th>cluster rule</th><td>{_e(rule)}</td></tr>"
        f"<tr><th>removed</th><td class='num'>{removed:,}</td></tr>"
        f"<tr><th>removed by the components rule (same pairs)</th>"
        f"<td class='num'>{by_components:,}</td></tr></table>"
        f"{measured}"
        "<table id='largest-clusters'><tr><th>largest clusters: kept document</th>"
        f"<th>documents</th></tr>{rows}</table></section>"
    )


def _banding_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    if data.get("banding"):
        b = data["banding"]
        return (
            '<section id="banding"><h2>Which pairs get compared</h2>'
            f"{_img(pngs['banding'], 'candidate probability curve')}"
            f'<p class="explain">Each document\'s sketch of {b["num_perm"]} MinHash values is '
            f"cut into {b['bands']} bands of {b['rows']} values. Two documents are compared only "
            "if they agree on every value of at least one band, which happens with probability "
            f"1 − (1 − J<sup>{b['rows']}</sup>)<sup>{b['bands']}</sup> for a pair of Jaccard "
            f"J. At the threshold {b['threshold']:g} that is {b['probability_at_threshold']:.4f}"
            f", so about {100 * (1 - b['probability_at_threshold']):.2f}% of pairs exactly at "
            "the threshold are missed (pairs above it are missed less often). Pairs far to the "
            "left are almost never compared, which is what makes the job fast.</p></section>"
        )
    if data.get("simhash"):
        s = data["simhash"]
        rows = [
            ("max differing bits (k)", s["hamming_k"]),
            ("blocks of the 64 bits", f"{s['blocks']} (bits: {s['block_bits']})"),
            ("tables (C(blocks, k))", s["tables"]),
            ("blocks kept per table", s["kept_blocks_per_table"]),
            ("features / hash / weighting", f"{s['features']} / {s['hash']} / {s['weighting']}"),
            ("cosine at k bits, cos(πk/64)", f"{s['cosine_at_k']:.4f}"),
        ]
        table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
        return (
            '<section id="banding"><h2>Which pairs get compared (SimHash tables)</h2>'
            f"<table>{table}</table>"
            '<p class="explain">Each document has one 64-bit SimHash fingerprint, cut into '
            f"{s['blocks']} blocks. Two fingerprints within {s['hamming_k']} bits differ in at "
            f"most {s['hamming_k']} blocks, so they agree on all blocks of at least one choice of "
            f"{s['kept_blocks_per_table']} blocks; one table per choice ({s['tables']} tables) "
            "finds every such pair, with certainty, without comparing all pairs.</p></section>"
        )
    return (
        '<section id="banding"><h2>Which pairs get compared</h2><p class="explain">'
        "Exact run: only documents with the same fingerprint are paired.</p></section>"
    )


def _estimates_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    est = data.get("estimates")
    if not est:
        return ""
    if "estimates" not in pngs:
        return (
            '<section id="estimates"><h2>Estimate against exact Jaccard</h2>'
            '<p class="explain">No verified MinHash pairs.</p></section>'
        )
    sample = " (a random sample)" if est["sampled"] else ""
    within = est["within_2se"]
    return (
        '<section id="estimates"><h2>Estimate against exact Jaccard</h2>'
        f"{_img(pngs['estimates'], 'MinHash estimate against exact Jaccard')}"
        '<p class="explain">For each verified MinHash pair' + sample + ", the fraction of "
        f"agreeing sketch values (the estimate, {est['num_perm']} values) against the exact "
        "Jaccard the job measured. The estimate is only used to reason about banding; the "
        "decision uses the exact value. Points should scatter around the diagonal within the "
        f"shaded ±2 standard errors, √(J(1−J)/m): here {_fmt_num(within * 100, 1)}% do, with "
        f"a mean absolute error of {_fmt_num(est['mean_abs_error'], 4)}.</p></section>"
    )


def _clusters_html(data: dict[str, Any]) -> str:
    clusters = data["top_clusters"]
    corpus = data["corpus"]
    config = data["run"]["config"]
    simhash = data["run"]["method"] == "simhash"
    rule = {
        "minhash": f"Jaccard to the representative below the threshold ({config.get('threshold')})",
        "simhash": f"more than {config.get('hamming_k')} SimHash bits from the representative",
    }.get(data["run"]["method"], "not identical to the representative")
    parts = [
        '<section id="clusters"><h2>Largest clusters</h2>'
        '<p class="explain">The largest clusters, each with its members in breadth-first '
        "order from the representative (<em>hops</em>: verified pairs on the way; <em>linked "
        "to</em>: the member it was reached from, with that pair's similarity). The "
        "<em>Jaccard to representative</em> is computed here from the texts, with the run's "
        f"normalisation and shingle size. Members with {_e(rule)} are highlighted: they are "
        "in the cluster through a chain "
        "(A ~ B ~ C with A and C not similar themselves), not because they resemble the "
        "representative.</p>"
    ]
    if not corpus["available"]:
        parts.append(
            f'<p class="muted">Texts unavailable ({_e(corpus["problem"])}); run '
            "<code>neardup report OUTPUT --input CORPUS</code> to show snippets.</p>"
        )
    if not clusters:
        parts.append('<p class="explain">No cluster has more than one document.</p>')
    for c in clusters:
        shown = c["members_shown"]
        more = f", {shown} shown" if shown < c["size"] else ""
        chain = (
            f"; {c['chained_members']} member(s) only through a chain"
            if c["chained_members"]
            else ""
        )
        parts.append(
            f"<h3>Cluster {_e(c['cluster_id'])}: {c['size']:,} documents{more}{_e(chain)}</h3>"
        )
        header = (
            "<tr><th>document</th><th>hops</th><th>linked to (similarity)</th>"
            "<th>Jaccard to representative</th><th>shingles</th>"
            + ("<th>SimHash bits from rep.</th>" if simhash else "")
            + "<th>first characters</th></tr>"
        )
        body = []
        for m in c["members"]:
            j = m["jaccard_to_representative"]
            classes = []
            if m["is_representative"]:
                classes.append("rep")
            elif m["below_threshold"]:
                classes.append("below")
            link = (
                f"{_e(m['linked_to'])} ({_fmt_num(m['link_similarity'])})"
                if m["linked_to"] is not None
                else ("representative" if m["is_representative"] else "–")
            )
            snippet = _e(m["snippet"]) if m["snippet"] is not None else "<span class=muted>–</span>"
            cells = [
                f"<td class='id'>{_e(m['doc_id'])}</td>",
                f"<td class='num'>{m['hops'] if m['hops'] >= 0 else '?'}</td>",
                f"<td>{link}</td>",
                f"<td class='num sim'>{_fmt_num(j)}</td>",
                f"<td class='num'>{_fmt_num(m['n_shingles'])}</td>",
            ]
            if simhash:
                cells.append(
                    f"<td class='num bits'>{_fmt_num(m['hamming_to_representative'])}</td>"
                )
            cells.append(f"<td class='snippet'>{snippet}</td>")
            body.append(f"<tr class='{' '.join(classes)}'>{''.join(cells)}</tr>")
        parts.append(f"<table>{header}{''.join(body)}</table>")
    parts.append("</section>")
    return "".join(parts)


def render_html(data: dict[str, Any], pngs: dict[str, bytes] | None = None) -> str:
    """The report page for ``data`` (from :func:`report_data`)."""
    pngs = figure_pngs(data) if pngs is None else pngs
    run = data["run"]
    title = f"neardup report: {run['output']}"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>Near-duplicate run report</h1><p class='muted'>{_e(run['output'])} · "
        f"neardup-spark {_e(run['version'])} · {_e(run['method'])}</p>"
        + _summary_html(data)
        + boilerplate_html(data.get("boilerplate"))
        + _stages_html(data)
        + _similarities_html(data, pngs)
        + _cluster_sizes_html(data, pngs)
        + _removals_html(data, pngs)
        + _banding_html(data, pngs)
        + _estimates_html(data, pngs)
        + _clusters_html(data)
        + "</body></html>\n"
    )


def write_report(
    output: str,
    input_path: str | None = None,
    top: int = TOP_CLUSTERS,
    max_members: int = MAX_MEMBERS,
) -> str:
    """Write ``OUTPUT/report.html`` for the run in ``output``; returns its path.

    ``input_path``: the corpus, when ``report.json``'s ``input`` is not readable from here.
    """
    page = render_html(report_data(output, input_path, top=top, max_members=max_members))
    target = child(output, REPORT_HTML)
    write_beside_run(storage_for(None, output), output, REPORT_HTML, page.encode("utf-8"))
    return target
