"""The machine line of a benchmark's results."""

from __future__ import annotations

import datetime as dt
import os
import platform

import pyspark

from neardup_spark.bench.machine import machine_info, one_minute_load


def test_machine_info_describes_this_machine():
    info = machine_info()
    assert info["cores"] == os.cpu_count()
    assert info["python"] == platform.python_version()
    assert info["spark"] == pyspark.__version__
    assert info["ram_bytes"] is None or info["ram_bytes"] > 2**28
    assert dt.datetime.fromisoformat(info["date"]).tzinfo is not None
    load = one_minute_load()
    assert load is None or load >= 0
