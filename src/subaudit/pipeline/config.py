"""Loading and validating params.yaml against the packaged schema.

The workflow calls :func:`validate_params` while it parses, so a wrong key or value
stops the run before any job starts, with a message that names the key path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from subaudit.validation import ConfigError


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The params.yaml JSON schema shipped with the package."""
    text = resources.files("subaudit.pipeline").joinpath("params.schema.yaml").read_text()
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
    if "minItems" in s:
        bounds.append(f"with at least {s['minItems']} item(s)")
    kind = s.get("type")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    text = " ".join(x for x in [kind or "", " and ".join(bounds)] if x)
    if s.get("description"):
        text += f" ({s['description']})"
    return text or error.message


def validate_params(params: Mapping[str, Any], source: str = "params.yaml") -> None:
    """Raise ConfigError naming the first offending key and what it allows."""
    _check_finite(params, "", source)
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(dict(params)), key=lambda e: list(e.absolute_path))
    if not errors:
        _check_selections(params, source)
        params = selected(params)           # what is left out is not checked: it does not run
        _check_registered(params, source)
        _check_natural(params, source)
        _check_one_run(params, source)
        _check_deep(params, source)
        _check_ablations(params, source)
        _check_reconstruction(params, source)
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


#: The selection lists: (section, list key, mapping key). The list names the entries of the
#: mapping that run (null: all): a preset replaces a list whole, where Snakemake merges a mapping
#: key by key and so could never leave an entry out.
SELECTIONS = (("natural", "run_experiments", "experiments"), ("deep", "run_cases", "cases"))


def selected(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with each mapping of :data:`SELECTIONS` narrowed to the entries its list names
    (in the mapping's order); the workflow and the command line use only this view."""
    out = dict(params)
    for section, chosen, mapping in SELECTIONS:
        names = out[section][chosen]
        if names is not None:
            out[section] = {**out[section], mapping: {k: v for k, v in out[section][mapping].items() if k in names}}
    return out


def _check_selections(params: Mapping[str, Any], source: str) -> None:
    for section, chosen, mapping in SELECTIONS:
        for i, name in enumerate(params[section][chosen] or ()):
            if name not in params[section][mapping]:
                raise _invalid(source, f"{section}.{chosen}[{i}]", name,
                               f"one of {section}.{mapping}: " + ", ".join(params[section][mapping]))


def _check_finite(value: Any, key: str, source: str) -> None:
    """No NaN or infinity anywhere (YAML's .nan and .inf): JSON Schema's bounds compare false
    with NaN, so a NaN learning rate would pass them and train to NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        raise _invalid(source, key or "(top level)", value, "a finite number")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_finite(v, f"{key}.{k}" if key else str(k), source)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite(v, f"{key}[{i}]", source)


def _invalid(source: str, key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{source}: {key} = {value!r} is invalid; allowed: {allowed}")


def _check_names(source: str, key: str, names: Any, allowed: Any, called: str = "") -> None:
    """Each of ``names`` (the list at ``key``) one of ``allowed`` (a registry or a list; named
    ``called`` in the message, where it has a name of its own)."""
    for i, name in enumerate(names or ()):
        if name not in allowed:
            raise _invalid(source, f"{key}[{i}]", name, "one of " + called + ", ".join(allowed))


def _check_registered(params: Mapping[str, Any], source: str) -> None:
    """Names that must be in a registry: estimators, scenarios."""
    from subaudit.estimation import ESTIMATORS
    from subaudit.scenarios import SCENARIOS

    _check_names(source, "estimators", params["estimators"], ESTIMATORS)
    _check_names(source, "natural.scenarios", params["natural"]["scenarios"], SCENARIOS)
    valid = [n for n, e in ESTIMATORS.items() if e.valid]
    if not set(params["estimators"]) & set(valid):
        raise _invalid(source, "estimators", params["estimators"],
                       "a list holding a valid estimator (" + ", ".join(valid) + "): the report's "
                       "verdicts and the ceilings use one")


def _check_natural(params: Mapping[str, Any], source: str) -> None:
    """Cross-field checks of the natural-data experiments (sources, backbones, sizes, what
    each audited scenario needs of them) and of the declared variations."""
    natural = params["natural"]
    for name, exp in natural["experiments"].items():
        _check_experiment(natural, f"natural.experiments.{name}", exp, source)
    for i, var in enumerate(natural.get("variations", [])):
        _check_variation(natural["experiments"], f"natural.variations[{i}]", var, source)


def _check_experiment(natural: Mapping[str, Any], key: str, exp: Mapping[str, Any], source: str) -> None:
    """One experiment at ``key``: its scenarios among natural.scenarios and able to audit it
    (each scenario's own check), its sizes, and its data (:func:`_check_experiment_data`)."""
    from subaudit.data.backbones import BACKBONES
    from subaudit.pipeline.settings import experiment_scenarios
    from subaudit.scenarios import SCENARIOS

    _check_names(source, f"{key}.scenarios", exp.get("scenarios"), natural["scenarios"], "natural.scenarios: ")
    for scenario in experiment_scenarios(exp, natural["scenarios"]):
        wrong = SCENARIOS[scenario].check_experiment(key, exp, natural)
        if wrong is not None:
            raise _invalid(source, *wrong)
    if exp.get("s5_pool", 0) > exp["n_aux"]:
        raise _invalid(source, f"{key}.s5_pool", exp["s5_pool"],
                       f"at most n_aux = {exp['n_aux']} (S5 searches the auxiliary records)")
    bb = BACKBONES.get(exp["backbone"])
    if "weights_checksum" in exp and (bb is None or bb.hub_repo is None):
        raise _invalid(source, f"{key}.weights_checksum", exp["weights_checksum"],
                       "only with a backbone whose weights are downloaded ("
                       + ", ".join(n for n, b in BACKBONES.items() if b.hub_repo) + ")")
    _check_experiment_data(key, exp, source)


def _check_experiment_data(key: str, exp: Mapping[str, Any], source: str) -> None:
    """An experiment's source (a registered one with a backbone of its family, or the user's
    own features file), scoring interval and per-class split."""
    from subaudit.data import SOURCES, own_features
    from subaudit.data.backbones import BACKBONES

    if exp["source"] == own_features.NAME:
        _check_own_features(exp, key, source)
        return
    if "features_file" in exp:
        raise _invalid(source, f"{key}.features_file", exp["features_file"],
                       f"only with source: {own_features.NAME}")
    if exp["source"] not in SOURCES:
        raise _invalid(source, f"{key}.source", exp["source"],
                       "one of " + ", ".join([*SOURCES, own_features.NAME]))
    family = SOURCES[exp["source"]].family
    backbones = [n for n, b in BACKBONES.items() if b.family == family] or ["none"]
    if exp["backbone"] not in backbones:
        raise _invalid(source, f"{key}.backbone", exp["backbone"],
                       f"one of {', '.join(backbones)} (backbones of {family} sources)")
    if exp["every"] > exp["steps"]:
        raise _invalid(source, f"{key}.every", exp["every"], f"at most steps = {exp['steps']}")
    classes = SOURCES[exp["source"]].classes
    if exp["per_class"] and exp["n_train"] % classes:
        raise _invalid(source, f"{key}.n_train", exp["n_train"],
                       f"a multiple of the {classes} classes (per_class: true)")


def _check_variation(experiments: Mapping[str, Any], key: str, var: Mapping[str, Any], source: str) -> None:
    """One declared variation: existing experiments and scenarios, a scoring interval within
    its steps in each experiment."""
    from subaudit.scenarios import SCENARIOS

    _check_names(source, f"{key}.experiments", var.get("experiments"), experiments)
    _check_names(source, f"{key}.scenarios", var.get("scenarios"), SCENARIOS)
    for name in var.get("experiments", list(experiments)):
        steps = min(var.get("steps", [experiments[name]["steps"]]))
        every = max(var.get("every", [experiments[name]["every"]]))
        if every > steps:
            raise _invalid(source, f"{key}.every", every, f"at most steps = {steps} (experiment {name})")


def _check_one_run(params: Mapping[str, Any], source: str) -> None:
    """The one-run audits: an existing experiment, registered kinds and methods, and no more
    label canaries than the experiment's auxiliary records."""
    from subaudit.estimation.one_run import ONE_RUN_METHODS
    from subaudit.scenarios.one_run_canaries import CANARY_KINDS

    one = params["one_run"]
    experiments = params["natural"]["experiments"]
    if one["experiment"] not in experiments:
        raise _invalid(source, "one_run.experiment", one["experiment"], "one of " + ", ".join(experiments))
    for key, registry in (("kinds", CANARY_KINDS), ("methods", ONE_RUN_METHODS)):
        for i, name in enumerate(one[key]):
            if name not in registry:
                raise _invalid(source, f"one_run.{key}[{i}]", name, "one of " + ", ".join(registry))
    n_aux = experiments[one["experiment"]]["n_aux"]
    if "label" in one["kinds"] and one["canaries"] > n_aux:
        raise _invalid(source, "one_run.canaries", one["canaries"],
                       f"at most n_aux = {n_aux} of experiment {one['experiment']} (label canaries)")


def _check_deep(params: Mapping[str, Any], source: str) -> None:
    """The deep-network audits: an image source, registered names, a pool that holds every
    input kind's pairs, and enough canaries for a positive bound at the asked confidence."""
    deep = params["deep"]
    if deep["source"] is None:
        return
    _check_deep_names(deep, source)
    meta = deep["metagradient"]
    if "metagradient" in deep["kinds"] and meta["base"] > deep["sizes"][meta["base_from"]]:
        raise _invalid(source, "deep.metagradient.base", meta["base"],
                       f"at most deep.sizes.{meta['base_from']} = {deep['sizes'][meta['base_from']]} "
                       f"(the records deep.metagradient.base_from names)")
    _check_deep_counts(params, source)


def _check_deep_names(deep: Mapping[str, Any], source: str) -> None:
    """The deep phase's source, network, kinds, games, procedures, scores, cases (and each
    case's kinds and games) and proxy: registered names."""
    from subaudit.data import SOURCES
    from subaudit.estimation.procedures import GAMES, PROCEDURES
    from subaudit.scenarios.canary_optimisation import PROXY_NETWORKS
    from subaudit.pipeline.costs import NETWORK_NAMES
    from subaudit.scenarios.deep_canaries import DEEP_KINDS, PROXY_RECORDS, SCORES
    from subaudit.scenarios.deep_cases import CASES

    images = [n for n, s in SOURCES.items() if s.family == "image"]
    if deep["source"] not in images:
        raise _invalid(source, "deep.source", deep["source"], "an image source (" + ", ".join(images) + ") or null")
    if deep["network"] not in NETWORK_NAMES:
        raise _invalid(source, "deep.network", deep["network"], "one of " + ", ".join(NETWORK_NAMES))
    for key, registry in (("kinds", DEEP_KINDS), ("games", GAMES), ("procedures", PROCEDURES), ("scores", SCORES)):
        _check_names(source, f"deep.{key}", deep[key], registry)
    for name, case in deep["cases"].items():
        if name not in CASES:
            raise _invalid(source, f"deep.cases.{name}", name, "cases named " + ", ".join(CASES))
        for key, allowed in (("kinds", deep["kinds"]), ("games", GAMES)):
            _check_names(source, f"deep.cases.{name}.{key}", case.get(key), allowed)
    meta = deep["metagradient"]
    for key, registry in (("network", PROXY_NETWORKS), ("base_from", PROXY_RECORDS)):
        if meta[key] not in registry:
            raise _invalid(source, f"deep.metagradient.{key}", meta[key], "one of " + ", ".join(registry))


def _check_deep_counts(params: Mapping[str, Any], source: str) -> None:
    """Each case's gradient canaries fit the network's parameters, the pool holds every input
    kind's pairs, and every canary count is enough for a positive bound by each procedure."""
    from subaudit.estimation.procedures import least_canaries
    from subaudit.pipeline.costs import NETWORK_COSTS
    from subaudit.scenarios.deep_canaries import DEEP_KINDS
    from subaudit.scenarios.deep_cases import case_setting

    deep = params["deep"]
    parameters = NETWORK_COSTS[deep["network"]].parameters
    # each case's gradient canaries, under the key that sets them (its own, or the deep phase's)
    gradient = {(f"deep.cases.{name}.gradient_canaries" if "gradient_canaries" in case else
                 "deep.gradient_canaries"): case_setting(deep, name)["gradient_canaries"]
                for name, case in deep["cases"].items() if "gradient" in case_setting(deep, name)["kinds"]}
    for key, count in gradient.items():
        if count * deep["gradient_width"] > parameters:
            raise _invalid(source, key, count,
                           f"at most {parameters // deep['gradient_width']} slots of deep.gradient_width = "
                           f"{deep['gradient_width']} coordinates ({deep['network']} has {parameters} parameters)")
    inputs = [k for k in deep["kinds"] if not DEEP_KINDS[k].white_box]
    need = 2 * deep["canaries"] * len(inputs)
    if need > deep["sizes"]["pool"]:
        raise _invalid(source, "deep.sizes.pool", deep["sizes"]["pool"],
                       f"at least 2 x canaries x input kinds = {need} held-out images")
    counts = {"deep.canaries": deep["canaries"] if inputs else None, **gradient}
    for key, count in counts.items():
        for p in deep["procedures"] if count else ():
            if count < least_canaries(p, params["delta"], params["alpha"], family=deep["family"]):
                raise _invalid(source, key, count,
                               f"enough for a positive bound by {p} at confidence {1 - params['alpha']:g}")


def _check_reconstruction(params: Mapping[str, Any], source: str) -> None:
    """The reconstruction reads an image experiment's split (raw pixels)."""
    from subaudit.data import SOURCES

    rec, experiments = params["reconstruction"], params["natural"]["experiments"]
    images = [n for n, e in experiments.items() if e["source"] in SOURCES
              and SOURCES[e["source"]].family == "image"]
    if rec["experiment"] is not None and rec["experiment"] not in images:
        raise _invalid(source, "reconstruction.experiment", rec["experiment"],
                       "an image experiment of natural.experiments (" + (", ".join(images) or "none")
                       + ") or null")


def _check_ablations(params: Mapping[str, Any], source: str) -> None:
    """The ablations: an existing experiment, R' values the base audits hold (even, so each
    world has half), and T values whose scaled scoring interval fits."""
    from subaudit.pipeline.settings import ablation_every

    abl = params["ablations"]
    natural = params["natural"]
    if abl["experiment"] not in natural["experiments"]:
        raise _invalid(source, "ablations.experiment", abl["experiment"],
                       "one of " + ", ".join(natural["experiments"]))
    for i, name in enumerate(abl["scenarios"]):
        if name not in natural["scenarios"]:
            raise _invalid(source, f"ablations.scenarios[{i}]", name,
                           "one of natural.scenarios: " + ", ".join(natural["scenarios"]))
    for i, r in enumerate(abl["runs"]):
        if r % 2 or r > natural["runs"]:
            raise _invalid(source, f"ablations.runs[{i}]", r,
                           f"an even number of runs, at most natural.runs = {natural['runs']}")
    base = natural["experiments"][abl["experiment"]]
    for i, t in enumerate(abl["steps"]["values"]):
        if t != int(t) or ablation_every(base, int(t)) > t:
            raise _invalid(source, f"ablations.steps.values[{i}]", t, "a whole number of steps")


def _check_own_features(exp: Mapping[str, Any], key: str, source: str) -> None:
    """A user's features file: present, verified by its checksum, readable, big enough."""
    from subaudit.data import own_features
    from subaudit.validation import ParameterError

    for needed in ("features_file", "checksum"):
        if needed not in exp:
            raise ConfigError(f"{source}: missing key {key}.{needed} (source {own_features.NAME} "
                              "needs the file and its sha256)")
    if len(exp["checksum"]) != 64:
        raise _invalid(source, f"{key}.checksum", exp["checksum"], "a sha256 (64 hex digits)")
    if exp["backbone"] != "none":
        raise _invalid(source, f"{key}.backbone", exp["backbone"],
                       "none (the file holds the features)")
    try:
        own_features.check(exp["features_file"], exp["checksum"], n_train=exp["n_train"],
                           n_aux=exp["n_aux"], n_test=exp["n_test"], per_class=exp["per_class"])
    except ParameterError as err:
        raise _invalid(source, f"{key}.{err.name}", err.value, err.allowed) from None
    if exp["every"] > exp["steps"]:
        raise _invalid(source, f"{key}.every", exp["every"], f"at most steps = {exp['steps']}")


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping a params or preset file holds (empty: {}), or ConfigError naming the file
    and what is wrong: missing, a folder, unreadable, not YAML (with the line), a tag that
    would construct a Python object (safe loading refuses it), not a mapping."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{path}: no such file")
    if p.is_dir():
        raise ConfigError(f"{path}: a folder, not a YAML file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read as text ({err})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        what = err.problem or err.context or "invalid"
        if isinstance(err, yaml.constructor.ConstructorError):
            what += "; only plain YAML is read (no tags that build Python objects)"
        raise ConfigError(f"{path}: not valid YAML{where}: {what}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(err).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level, got a {type(data).__name__}")
    return data


def load_params(path: str | Path) -> dict[str, Any]:
    """Read (:func:`read_yaml`) and validate a params file (all of it: :func:`selected` gives
    the view that runs)."""
    data = read_yaml(path)
    validate_params(data, source=str(path))
    return data
