"""Nightly runs against a persistent index (`dedupe --index DIR`) and its housekeeping."""
