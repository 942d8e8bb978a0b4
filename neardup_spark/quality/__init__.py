"""Quality tooling: synthetic corpora, evaluation, the exact oracle, labelled sets, explain,
worked examples."""
