"""The evaluation's result as printed Markdown: summary, truth, oracle and labelled sections.

:func:`format_table` renders :func:`neardup_spark.quality.evaluate.evaluate`'s result and
:func:`format_labelled` that of :func:`neardup_spark.quality.labelled.evaluate_labelled`; cells
are formatted by :func:`neardup_spark.quality.tables.format_cell`.
"""

from __future__ import annotations

from typing import Any

from neardup_spark.quality.tables import format_cell, markdown_table


def _fraction(num: int, den: int, value: float | None) -> str:
    """``0.8750 (14/16)``."""
    return f"{format_cell(value)} ({num:,}/{den:,})"


def format_table(result: dict[str, Any]) -> str:
    """The result as plain-text Markdown: summary, truth, oracle and labelled sections."""
    t = result["threshold"]
    out = _summary_lines(result)
    if result.get("truth"):
        out += _truth_lines(result["truth"], t)
    if result.get("oracle"):
        out += _oracle_lines(result["oracle"], t)
    labelled = result.get("labelled")
    if labelled is not None:
        out += ["", format_labelled(labelled)]
    return "\n".join(out) + "\n"


def _summary_lines(result: dict[str, Any]) -> list[str]:
    """The heading, the run's counts and any output contract warnings."""
    t = result["threshold"]
    summary = result["summary"]
    out = [
        f"## Evaluation of {result['output']} (threshold {t:g} from {result['threshold_source']})",
        "",
        markdown_table(
            ["documents", "clusters", "duplicate clusters", "docs in them", "pairs/ rows"],
            [
                [
                    summary["docs"],
                    summary["clusters"],
                    summary["duplicate_clusters"],
                    summary["docs_in_duplicate_clusters"],
                    summary["pairs"],
                ]
            ],
        ),
    ]
    problems = {k: v for k, v in result.get("checks", {}).items() if v}
    if problems:
        out += [
            "",
            "**Output contract warnings:** "
            + ", ".join(f"{k} = {v:,}" for k, v in problems.items()),
        ]
    return out


def _truth_lines(truth: dict[str, Any], t: float) -> list[str]:
    """Scores against the planted truth, then recall by edit kind and by Jaccard band."""
    out = [
        "",
        f"### Against the planted truth ({truth['pairs']:,} pairs, "
        f"{truth['positives']:,} with Jaccard >= {t:g})",
        "",
        markdown_table(
            ["metric", "value"],
            [
                [
                    "pair precision",
                    _fraction(
                        truth["reported_correct"], truth["reported_pairs"], truth["precision"]
                    ),
                ],
                [
                    "pair recall",
                    _fraction(truth["positives_found"], truth["positives"], truth["recall"]),
                ],
                ["F1", format_cell(truth["f1"])],
                ["cluster ARI", format_cell(truth["ari"])],
                [
                    "co-clustered pair precision / recall",
                    f"{format_cell(truth['clustering']['pair_precision'])} / "
                    f"{format_cell(truth['clustering']['pair_recall'])}",
                ],
            ],
        ),
        "",
        f"Precision: {truth['precision_definition']}.",
    ]
    check = truth.get("truth_jaccard_check")
    if check and "disagreements" in check:
        out.append(
            f"Truth Jaccard vs the oracle: {check['disagreements']:,} of {check['pairs']:,} "
            f"disagree (max |diff| {check['max_abs_diff']:.2e})."
        )
    return out + _truth_breakdown_lines(truth, t)


def _truth_breakdown_lines(truth: dict[str, Any], t: float) -> list[str]:
    """Recall by edit kind and by Jaccard band, over all planted pairs."""
    return [
        "",
        "Recall by edit kind (all planted pairs; found = same cluster):",
        "",
        markdown_table(
            ["kind", "pairs", "found", "recall", "mean J", f"J>={t:g}", "found@t", "recall@t"],
            [
                [
                    r["kind"],
                    r["pairs"],
                    r["found"],
                    r["recall"],
                    r["mean_jaccard"],
                    r["positives"],
                    r["positives_found"],
                    r["positive_recall"],
                ]
                for r in truth["by_kind"]
            ],
        ),
        "",
        "Recall by Jaccard band (all planted pairs):",
        "",
        markdown_table(
            ["band", "pairs", "found", "recall"],
            [[r["band"], r["pairs"], r["found"], r["recall"]] for r in truth["by_band"]],
        ),
    ]


def _oracle_lines(oracle: dict[str, Any], t: float) -> list[str]:
    """Scores against the exact all-pairs oracle, then positives by Jaccard band."""
    return [
        "",
        f"### Exact all-pairs oracle ({oracle['docs']:,} documents, "
        f"{oracle['seconds']['total']:.1f} s)",
        "",
        markdown_table(
            ["metric", "value"],
            [
                [f"pairs with Jaccard >= {t:g}", oracle["positives"]],
                [
                    "recall (same cluster)",
                    _fraction(oracle["found"], oracle["positives"], oracle["recall"]),
                ],
                [
                    "edge recall (listed in pairs/)",
                    _fraction(
                        oracle["listed_in_pairs"], oracle["positives"], oracle["edge_recall"]
                    ),
                ],
                [
                    "precision (exact Jaccard of pairs/ rows)",
                    _fraction(
                        oracle["reported_correct"], oracle["reported_pairs"], oracle["precision"]
                    ),
                ],
                ["F1", format_cell(oracle["f1"])],
                [
                    "cluster pair precision",
                    _fraction(
                        oracle["found"],
                        oracle["co_clustered_pairs"],
                        oracle["cluster_pair_precision"],
                    ),
                ],
                [
                    "jaccard column mismatches",
                    f"{oracle['jaccard_mismatches']:,} of {oracle['jaccard_checked']:,}",
                ],
            ],
        ),
        "",
        markdown_table(
            ["band", "positives", "found", "missed", "recall"],
            [
                [r["band"], r["positives"], r["found"], r["missed"], r["recall"]]
                for r in oracle["by_band"]
            ],
        ),
    ]


def format_labelled(labelled: dict[str, Any]) -> str:
    """The :func:`evaluate_labelled` result as Markdown tables."""
    t = labelled["threshold"]
    head = f"### Labelled sets (exact Jaccard of word {labelled['ngram']}-shingles >= {t:g})"
    if not labelled["available"]:
        return f"{head}\n\n{labelled.get('note', 'not available')}"
    rows: list[list[Any]] = []
    scores: list[list[Any]] = []
    notes: list[str] = []
    for name, s in labelled["sets"].items():
        if not s["available"]:
            notes.append(f"{name}: {s['note']}")
            continue
        for r in s["labels"]:
            rows.append(
                [
                    name,
                    r["label"],
                    r["role"],
                    r["pairs"],
                    r["mean_jaccard"],
                    r["at_threshold"],
                    r["fraction_at_threshold"],
                ]
            )
        scores.append(
            [name, s["tp"], s["fp"], s["fn"], s["tn"], s["precision"], s["recall"], s["f1"]]
        )
        if s["ignored"]:
            ignored = ", ".join(f"{k!r} x{v}" for k, v in sorted(s["ignored"].items()))
            notes.append(f"{name}: ignored labels {ignored}")
        notes += [f"{name}: {note}" for note in s["notes"]]
    parts = [
        head,
        "",
        markdown_table(["set", "label", "role", "pairs", "mean J", f"J>={t:g}", "fraction"], rows),
        "",
        markdown_table(["set", "TP", "FP", "FN", "TN", "precision", "recall", "F1"], scores),
    ]
    if notes:
        parts += ["", *notes]
    return "\n".join(parts)
