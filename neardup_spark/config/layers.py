"""The layered settings (defaults, mirrored in ``conf/default.yaml`` -> each ``--config`` YAML
file -> ``--set key=value`` overrides -> explicit command-line options; later wins), read into
the typed objects."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from neardup_spark.config.dedupe import NESTED_OPTIONS, BoilerplateOptions, DedupeConfig
from neardup_spark.config.settings import ExecutionSettings, JobSettings, SessionSettings
from neardup_spark.errors import UserError
from neardup_spark.kernels.normalize import NormalizeOptions
from neardup_spark.redaction import redact_override

_SESSION_KEYS = frozenset(f.name for f in dataclasses.fields(SessionSettings))
_EXECUTION_KEYS = frozenset(f.name for f in dataclasses.fields(ExecutionSettings))
_DEDUPE_KEYS = frozenset(f.name for f in dataclasses.fields(DedupeConfig) if f.init)


def _merge(base: dict[str, Any], layer: dict[str, Any], source: str) -> dict[str, Any]:
    known = _DEDUPE_KEYS | _SESSION_KEYS | _EXECUTION_KEYS
    out = dict(base)
    for key, value in layer.items():
        if key not in known:
            raise UserError(f"{source}: unknown setting {key!r}; known: {', '.join(sorted(known))}")
        if key in NESTED_OPTIONS:
            if not isinstance(value, dict):
                raise UserError(f"{source}: {key} must be a mapping")
            sub_known = {f.name for f in dataclasses.fields(NESTED_OPTIONS[key])}
            for sub in value:
                if sub not in sub_known:
                    known_list = ", ".join(sorted(sub_known))
                    raise UserError(f"{source}: unknown setting {key}.{sub}; known: {known_list}")
            out[key] = {**out.get(key, {}), **value}
        elif key in ("spark", "plan"):
            if not isinstance(value, dict):
                raise UserError(f"{source}: {key} must be a mapping of settings")
            out[key] = {**out.get(key, {}), **{str(k): str(v) for k, v in value.items()}}
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict[str, Any]:
    """``"a.b=1"`` -> ``{"a": {"b": 1}}``; the value is read as YAML (numbers, booleans, null)."""
    if "=" not in text:
        raise UserError(f"--set expects key=value, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    parts = key.strip().split(".")
    if parts[0] == "spark" and len(parts) > 1:
        # A Spark setting, kept whole: --set spark.sql.shuffle.partitions=8
        return {"spark": {key.strip(): raw}}
    node: dict[str, Any] = {}
    cursor = node
    for part in parts[:-1]:
        cursor[part] = {}
        cursor = cursor[part]
    cursor[parts[-1]] = value
    return node


def read_yaml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except FileNotFoundError:
        raise UserError(f"config file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a mapping of settings")
    return data


def _layered(
    config_files: list[str] | None,
    overrides: list[str] | None,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for path in config_files or []:
        merged = _merge(merged, read_yaml(path), str(path))
    for text in overrides or []:
        merged = _merge(merged, parse_override(text), f"--set {redact_override(text)}")
    return _merge(merged, {k: v for k, v in (options or {}).items() if v is not None}, "options")


def _build(cls: type, values: dict[str, Any]) -> Any:
    try:
        return cls(**values)
    except TypeError as exc:
        raise UserError(f"bad configuration: {exc}") from None


def load_settings(
    config_files: list[str] | None = None,
    overrides: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> JobSettings:
    """Layer defaults, YAML files, ``key=value`` overrides and explicit options into the dedupe
    config and the session settings, both validated."""
    merged = _layered(config_files, overrides, options)
    for key, nested in NESTED_OPTIONS.items():
        if key in merged:
            merged[key] = nested(**merged[key])
    dedupe = _build(DedupeConfig, {k: v for k, v in merged.items() if k in _DEDUPE_KEYS})
    session = _build(SessionSettings, {k: v for k, v in merged.items() if k in _SESSION_KEYS})
    execution = _build(ExecutionSettings, {k: v for k, v in merged.items() if k in _EXECUTION_KEYS})
    return JobSettings(dedupe, session, execution)


def load_session_settings(
    config_files: list[str] | None = None,
    overrides: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> SessionSettings:
    """Only the session settings of the same layers (commands that run no dedupe: ingest,
    index); dedupe keys in a shared config file are accepted and not validated here."""
    merged = _layered(config_files, overrides, options)
    return _build(SessionSettings, {k: v for k, v in merged.items() if k in _SESSION_KEYS})


def build_config(
    config_files: list[str] | None = None,
    overrides: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> DedupeConfig:
    """The dedupe config of the same layers (the Python API); session keys are accepted (a
    config file may hold both) and left to :func:`load_settings`."""
    return load_settings(config_files, overrides, options).dedupe


def default_settings_dict() -> dict[str, Any]:
    """Every setting's default as written in ``conf/default.yaml`` (requested banding: null)."""
    data = {
        f.name: f.default
        for f in dataclasses.fields(DedupeConfig)
        if f.init and f.name not in NESTED_OPTIONS
    }
    data["normalize"] = dataclasses.asdict(NormalizeOptions())
    data["boilerplate"] = dataclasses.asdict(BoilerplateOptions())
    data.update(ExecutionSettings().to_dict())
    data.update(SessionSettings().to_dict())
    return data


def build_execution(
    config_files: list[str] | None = None,
    overrides: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> ExecutionSettings:
    """Where a run's steps execute, from the same layers (the Python API: ``run(...,
    execution=...)``); dedupe and session keys are accepted and left to the others."""
    return load_settings(config_files, overrides, options).execution
