"""WARC/WET ingest: crawl records into the Parquet corpus dedupe reads.

Modules, in the order a record passes through them:

- :mod:`.options`: what a run is asked to do (record and content types, extract mode, limits);
- :mod:`.warc`: finding the input files (driver) and reading each file's records into rows
  (executors, FastWARC);
- :mod:`.decode`: payload bytes -> text (content and transfer codings, charsets, sniffing);
- :mod:`.extract`: HTML -> text (Resiliparse);
- :mod:`.schema`: the record table, the corpus (OUTPUT) and ``_skipped/`` columns, skip reasons;
- :mod:`.job`: the Spark job :func:`~neardup_spark.ingest.job.ingest`, its counts and summary,
  written under a staging directory and committed like a dedupe run.
"""
