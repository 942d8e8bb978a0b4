"""Spark stages: each a function ``DataFrame -> DataFrame`` (or a factory of one).

Stages never act (no count, collect or write); the pipeline decides when to.
"""
