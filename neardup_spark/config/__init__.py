"""The typed configuration, resolved once where it is built.

Three objects come out of the same layered settings (defaults, mirrored in ``conf/default.yaml``
-> each ``--config`` YAML file -> ``--set key=value`` overrides -> explicit command-line
options; later wins; :mod:`.layers`):

* :class:`DedupeConfig` (:mod:`.dedupe`): what a run computes. Every instance is validated and
  has its LSH banding resolved (:attr:`DedupeConfig.banding`, derived from the threshold unless
  ``bands`` and ``rows`` are given), so later layers never resolve or check it again.
* :class:`ExecutionSettings` (:mod:`.settings`): where each step executes (the driver or Spark
  tasks), the thresholds the run's plan compares its facts with; the same outputs either way.
* :class:`SessionSettings` (:mod:`.settings`): where and how Spark runs (master, Spark settings,
  Arrow batch size); :func:`neardup_spark.runtime.session.build_session` takes it.

:func:`load_settings` returns all three (the command line); :func:`build_config` and
:func:`build_execution` one each (the Python API).
"""

from neardup_spark.config.dedupe import (
    BOILERPLATE_MODES,
    CLUSTER_RULES,
    INDEX_CHECKS,
    METHODS,
    NESTED_OPTIONS,
    REPRESENTATIVE_RULES,
    SIMHASH_FEATURES,
    SIMHASH_HASHES,
    SIMHASH_WEIGHTINGS,
    SIMILARITIES,
    Banding,
    BoilerplateOptions,
    DedupeConfig,
)
from neardup_spark.config.layers import (
    build_config,
    build_execution,
    default_settings_dict,
    load_session_settings,
    load_settings,
    parse_override,
    read_yaml,
)
from neardup_spark.config.prefer import (
    PREFER_SYNTAX,
    SORT_WAYS,
    parse_prefer,
    prefer_hint,
    prefer_spelling,
)
from neardup_spark.config.settings import (
    DEFAULT_LOCK_TIMEOUT,
    ExecutionSettings,
    JobSettings,
    SessionSettings,
)

__all__ = [
    "BOILERPLATE_MODES",
    "CLUSTER_RULES",
    "DEFAULT_LOCK_TIMEOUT",
    "INDEX_CHECKS",
    "METHODS",
    "NESTED_OPTIONS",
    "PREFER_SYNTAX",
    "REPRESENTATIVE_RULES",
    "SIMHASH_FEATURES",
    "SIMHASH_HASHES",
    "SIMHASH_WEIGHTINGS",
    "SIMILARITIES",
    "SORT_WAYS",
    "Banding",
    "BoilerplateOptions",
    "DedupeConfig",
    "ExecutionSettings",
    "JobSettings",
    "SessionSettings",
    "build_config",
    "build_execution",
    "default_settings_dict",
    "load_session_settings",
    "load_settings",
    "parse_override",
    "parse_prefer",
    "prefer_hint",
    "prefer_spelling",
    "read_yaml",
]
