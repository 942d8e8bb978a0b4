"""Keeping credentials out of what a job writes: reports, manifests, logs.

A setting is secret when its name or its value holds one of :data:`SECRET_WORDS` (any case):
``spark.hadoop.fs.s3a.secret.key``, ``spark.ssl.keyPassword``, a ``-Dfs.s3a.access.key=...``
inside ``spark.driver.extraJavaOptions``. Its value is replaced by :data:`REDACTED` wherever
the job records settings; Spark's own UI and event logs redact the same words through
:data:`SPARK_REDACTION_REGEX` (``spark.redaction.regex``, set by
:mod:`neardup_spark.runtime.session`). Values are matched as Spark matches them, so a setting
Spark hides is hidden here too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECRET_WORDS = ("secret", "password", "token", "credential", "key")
REDACTED = "*****(redacted)"
# Spark's default is (?i)secret|password|token|access[.]?key; "key" covers access keys and more.
SPARK_REDACTION_REGEX = "(?i)" + "|".join(SECRET_WORDS)

_SECRET = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)


def is_secret(name: str, value: object = "") -> bool:
    """True when a setting's name, or its value, holds a secret word.

    >>> is_secret("spark.hadoop.fs.s3a.secret.key"), is_secret("spark.driver.memory", "4g")
    (True, False)
    >>> is_secret("spark.driver.extraJavaOptions", "-Dfs.s3a.access.key=AKIA")
    True
    """
    return bool(_SECRET.search(name)) or (isinstance(value, str) and bool(_SECRET.search(value)))


def redact_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with the value of every secret setting replaced by :data:`REDACTED`;
    nested mappings (a ``spark:`` section) redacted the same way.

    >>> redact_settings({"spark.hadoop.fs.s3a.secret.key": "XYZ", "spark.driver.memory": "4g"})
    {'spark.hadoop.fs.s3a.secret.key': '*****(redacted)', 'spark.driver.memory': '4g'}
    """
    redacted: dict[str, Any] = {}
    for name, value in settings.items():
        if isinstance(value, Mapping):
            redacted[name] = redact_settings(value)
        elif value is not None and is_secret(str(name), value):
            redacted[name] = REDACTED
        else:
            redacted[name] = value
    return redacted


def redact_override(text: str) -> str:
    """A ``--set KEY=VALUE`` as messages may show it: the value hidden when secret.

    >>> redact_override("spark.hadoop.fs.s3a.secret.key=XYZ")
    'spark.hadoop.fs.s3a.secret.key=*****(redacted)'
    """
    name, sep, value = text.partition("=")
    return f"{name}{sep}{REDACTED}" if sep and is_secret(name, value) else text


_URL_PARAMETER = re.compile(r";([^;=]+)=([^;]*)")


def redact_remote(url: str | None) -> str | None:
    """A Spark Connect URL (``sc://host:443/;token=...;user_id=...``) with the values of its
    secret parameters redacted.

    >>> redact_remote("sc://h:443/;token=dapi123;x-databricks-cluster-id=c1")
    'sc://h:443/;token=*****(redacted);x-databricks-cluster-id=c1'
    """
    if url is None:
        return None
    return _URL_PARAMETER.sub(
        lambda m: f";{m.group(1)}={REDACTED if is_secret(m.group(1)) else m.group(2)}", url
    )
