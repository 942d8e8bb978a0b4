"""The machine a benchmark ran on: CPU, cores, RAM, versions, date and load (recorded with
every result, since the numbers mean little without it)."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any


def _java_version() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else "java"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "([^"]+)"', done.stderr + done.stdout)
    return match.group(1) if match else None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """CPU model, cores, RAM, Python/Spark/Java/datasketch versions, date, load."""
    cpu = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
                break
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_model": cpu or platform.processor() or None,
        "cores": os.cpu_count(),
        "ram_bytes": ram,
        "python": platform.python_version(),
        "spark": _version("pyspark"),
        "java": _java_version(),
        "datasketch": _version("datasketch"),
        "rensa": _version("rensa"),
        "numpy": _version("numpy"),
        "pyarrow": _version("pyarrow"),
        "kernel": platform.release(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "load_average": load,
    }


def one_minute_load() -> float | None:
    """The 1-minute load average, rounded (None where the system has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
