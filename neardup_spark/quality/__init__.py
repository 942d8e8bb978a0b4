"""Quality tooling: synthetic corpora, evaluation, the exact oracle, labelled sets, explain,
worked examples.

Synthetic corpora: ``generate`` (plan, ``generate_corpus``, ``write_corpus``) built on
``language`` (vocabulary, token format, rendering), ``documents`` (sentences and paragraphs)
and ``edits`` (the planted edit kinds).
Evaluation: ``evaluate`` (``evaluate()``, the truth and oracle sections) reading a run through
``run_tables``, with ``oracle`` (exact all-pairs Jaccard), ``labelled`` (human-labelled sets),
``metrics`` (ratios, bands, ARI), ``ids`` (id lookups) and ``evaluation_tables`` (the printed
result, on ``tables``).
One pair: ``explain``. The article's numbers: ``worked_examples``. Notebooks' sample run:
``sample_run``. The ingest's extractors and WARC readers: ``extraction_eval``.
"""
