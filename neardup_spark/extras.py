"""The optional parts of the package and what each needs beyond the core.

The core (what executors need for dedupe and nightly runs) is the package's plain dependencies;
``pip install 'neardup-spark[ingest]'`` (WARC/WET ingest), ``[report]`` (report.html figures)
and ``[bench]`` (the benchmark's single-process peer) add the rest. A command that needs a
missing extra says so with exit 2 (:func:`require_extra`); ``neardup dedupe`` without the
report extra writes ``report.json`` and says how to get ``report.html``.
"""

from __future__ import annotations

import importlib.util
import sys

from neardup_spark.errors import UserError

# The modules each extra installs (import names).
EXTRAS = {
    "ingest": ("fastwarc", "resiliparse", "brotli"),
    "report": ("matplotlib",),
    "bench": ("datasketch", "rensa"),
}


def _importable(module: str) -> bool:
    if module in sys.modules:  # None there means "blocked": an import would fail
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported (found without importing them)."""
    return [m for m in EXTRAS[extra] if not _importable(m)]


def install_hint(extra: str) -> str:
    return f"pip install 'neardup-spark[{extra}]'"


def require_extra(extra: str, what: str) -> None:
    """Raise :class:`UserError` naming the install command when ``extra`` is not installed."""
    missing = missing_modules(extra)
    if missing:
        raise UserError(
            f"{what} needs the {extra} extra ({', '.join(missing)} not installed): "
            f"{install_hint(extra)}"
        )
