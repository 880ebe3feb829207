"""Loading and validating params.yaml against the packaged schema.

The workflow calls :func:`validate_params` while it parses, so a wrong key or value
stops the run before any job starts, with a message that names the key path.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml


class ConfigError(ValueError):
    """params.yaml (or a --configfile override) breaks the schema."""


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The params.yaml JSON schema shipped with the package."""
    text = resources.files("subaudit").joinpath("params.schema.yaml").read_text()
    return yaml.safe_load(text)


def _key_path(error: jsonschema.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def _allowed(error: jsonschema.ValidationError) -> str:
    s = error.schema if isinstance(error.schema, Mapping) else {}
    if error.validator == "additionalProperties":
        known = sorted(s.get("properties", {}))
        return "known keys: " + ", ".join(known)
    if "enum" in s:
        return "one of " + ", ".join(map(str, s["enum"]))
    bounds = []
    for key, sym in (("exclusiveMinimum", ">"), ("minimum", ">="),
                     ("exclusiveMaximum", "<"), ("maximum", "<=")):
        if key in s:
            bounds.append(f"{sym} {s[key]}")
    kind = s.get("type")
    text = " ".join(x for x in [kind or "", " and ".join(bounds)] if x)
    if s.get("description"):
        text += f" ({s['description']})"
    return text or error.message


def validate_params(params: Mapping[str, Any], source: str = "params.yaml") -> None:
    """Raise ConfigError naming the first offending key and what it allows."""
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(dict(params)), key=lambda e: list(e.absolute_path))
    if not errors:
        _check_natural(params, source)
        return
    err = jsonschema.exceptions.best_match(errors)
    key = _key_path(err)
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        where = f"{key}." if key != "(top level)" else ""
        raise ConfigError(f"{source}: unknown key {where}{extra[0]}; {_allowed(err)}")
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        where = f"{key}." if key != "(top level)" else ""
        raise ConfigError(f"{source}: missing key {where}{missing[0]}")
    value = err.instance
    raise ConfigError(f"{source}: {key} = {value!r} is invalid; allowed: {_allowed(err)}")


def _check_natural(params: Mapping[str, Any], source: str) -> None:
    """Cross-field checks of the natural-data experiments (sources, backbones, sizes)."""
    from subaudit.data import SOURCES
    from subaudit.features import BACKBONES

    for family, exp in params["natural"]["experiments"].items():
        key = f"natural.experiments.{family}"
        names = [n for n, s in SOURCES.items() if s.family == family]
        if exp["source"] not in names:
            raise ConfigError(f"{source}: {key}.source = {exp['source']!r} is invalid; "
                              f"allowed: one of {', '.join(names)}")
        backbones = [n for n, b in BACKBONES.items() if b.family == family] or ["none"]
        if exp["backbone"] not in backbones:
            raise ConfigError(f"{source}: {key}.backbone = {exp['backbone']!r} is invalid; "
                              f"allowed: one of {', '.join(backbones)}")
        if exp["every"] > exp["steps"]:
            raise ConfigError(f"{source}: {key}.every = {exp['every']} is invalid; "
                              f"allowed: at most steps = {exp['steps']}")
        classes = SOURCES[exp["source"]].classes
        if exp["per_class"] and exp["n_train"] % classes:
            raise ConfigError(f"{source}: {key}.n_train = {exp['n_train']} is invalid; "
                              f"allowed: a multiple of the {classes} classes (per_class: true)")


def load_params(path: str | Path) -> dict[str, Any]:
    """Read and validate a params file."""
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    validate_params(data, source=str(path))
    return data
