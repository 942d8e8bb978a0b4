"""WARC/WET ingest: crawl records into the Parquet corpus dedupe reads."""
