"""The audit setting: every knob of one audit, and which artifact depends on which knobs.

An *experiment* (a free-form name in params.yaml) fixes the data and the model: source,
backbone, split sizes, hidden layers, optimiser and initialisation.  An audit *setting*
adds the knobs an audit varies (:data:`KNOBS`): the scenario, the sampling rate q, the
clip norm C, the learning rate, the steps T, the scoring interval k, the target eps_S,
the runs R and the repeat.

Each artifact depends on a subset of the knobs (:data:`DEPENDS`), and its path carries
exactly that subset as a *key* such as ``q1_C2_T100_k10_lr0.001_eps4_rep0``, so an audit
that varies one knob reuses every artifact that does not depend on it: another C retrains
the shards but keeps the reference model and the S3-S5 canaries, another R keeps every
shard already trained (a run's numbers depend on its index, not on R).  Paths are written
once, in :data:`PATHS`; :func:`key` and :func:`parse_key` are inverse.  The paper's ablations
(:func:`ablation_settings`) are settings like any variation; the reproduction switches
(:data:`SWITCHES`) choose between the paper's text and its code, and a per-q reference model
adds q to the reference's knobs (:func:`depends`).

Seeds are derived in one function, :func:`seed`, from the root seed and the keys of
:data:`SEED_KEYS`.  A run's randomness depends on (experiment, scenario, q, repeat, run)
only, so settings that differ in C, lr, T or the target share their random streams
(common random numbers: a curve over one knob is not blurred by fresh noise per point).
The runs with the target z (even indices) of scenarios whose world D is z as an input
record (S3-S6, :func:`target_groups`) are one training per setting, of its own seed
("target-world", no scenario), scored for each scenario's substitute; each scenario then
trains only its runs with z'.  Such a job of one world's runs indexes them within their world
(:func:`subaudit.pipeline.score_files.world_index`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from subaudit.scenarios import Scenario
from subaudit.scenarios.s2 import S2_COORDINATES
from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError

__all__ = ["ABLATED", "DEPENDS", "KNOBS", "OUTPUT_ROOTS", "PATHS", "REFERENCES", "SEED_KEYS", "SWITCHES",
           "VARIABLE", "Setting", "ablation_every", "ablation_settings", "canary_knobs", "depends",
           "expand", "experiment_scenarios", "fmt", "grid", "key", "model_sizes", "parse_key", "path", "seed",
           "settings_from_config", "switch_settings", "target_groups"]


def model_sizes(experiment: Mapping[str, Any]) -> tuple[int, ...]:
    """The layer sizes of an experiment's model: its inputs (the backbone's features, a tabular
    source's values, an image's pixels, or the columns of a user's features file), its hidden
    layers and its classes."""
    import numpy as np

    from subaudit.data import SOURCES, own_features
    from subaudit.data.backbones import BACKBONES

    hidden = tuple(int(h) for h in experiment.get("hidden", ()))
    if experiment["source"] == own_features.NAME:
        inputs, classes = own_features.layer_ends(experiment["features_file"])
        return (inputs, *hidden, classes)
    src = SOURCES[experiment["source"]]
    backbone = BACKBONES.get(experiment.get("backbone", "none"))
    inputs = backbone.dim if backbone is not None else (src.width or int(np.prod(src.shape)))
    return (inputs, *hidden, src.classes)


def fmt(x: float | int) -> str:
    """Shortest text that reads back as the same float (1.0 -> '1', 0.0625 -> '0.0625')."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


#: Knobs that appear in artifact keys, in key order: name -> (prefix, type).
KNOBS: dict[str, tuple[str, type]] = {
    "q": ("q", float),
    "clip": ("C", float),
    "steps": ("T", int),
    "every": ("k", int),
    "lr": ("lr", float),
    "target_epsilon": ("eps", float),
    "runs": ("R", int),
    "repeat": ("rep", int),
}

#: Knobs each artifact depends on (besides its experiment and scenario).  A canary's are
#: its scenario's (:func:`canary_knobs`).
DEPENDS: dict[str, tuple[str, ...]] = {
    "reference": ("steps", "every", "lr"),
    "target": ("steps", "every", "lr"),
    "calibration": ("q", "steps", "every", "target_epsilon"),
    "shard": ("q", "clip", "steps", "every", "lr", "target_epsilon", "repeat"),
    "target_shard": ("q", "clip", "steps", "every", "lr", "target_epsilon", "repeat"),
    "scores": ("q", "clip", "steps", "every", "lr", "target_epsilon", "runs", "repeat"),
    "estimates": ("q", "clip", "steps", "every", "lr", "target_epsilon", "runs", "repeat"),
    "utility": ("q", "clip", "steps", "every", "lr", "target_epsilon"),
    "one_run": ("q", "clip", "steps", "every", "lr", "target_epsilon"),
}

#: The folders the workflow writes into (relative to its working directory; dvc.yaml's outs):
#: a file below one of them is an output the workflow rebuilds, anything else is a user's.
OUTPUT_ROOTS: tuple[str, ...] = ("data/raw", "data/splits", "data/features", "results")

#: Path templates of every artifact the workflow writes, by phase (Snakemake wildcards: exp,
#: scenario, key, lo, hi, kind, q, source, filename, audit, name, ext); the rules name their files
#: from here (:func:`path`) and nowhere else.
PATHS: dict[str, str] = {
    "raw": "data/raw/{source}/{filename}",
    "split": "data/splits/{exp}.npz",
    "features": "data/features/{exp}.npz",
    "reference": "results/natural/{exp}/reference/{key}.npz",
    "target": "results/natural/{exp}/reference/{key}.json",
    "canary": "results/natural/{exp}/canaries/{scenario}_{key}.npz",
    "canary_info": "results/natural/{exp}/canaries/{scenario}_{key}.json",
    "calibration": "results/accounting/natural/{key}.csv",
    "shard": "results/natural/{exp}/shards/{scenario}_{key}/runs{lo}-{hi}.npz",
    "target_shard": "results/natural/{exp}/shards/target_{key}/runs{lo}-{hi}.npz",
    "scores": "results/natural/{exp}/scores/{scenario}_{key}.npz",
    "estimates": "results/natural/{exp}/estimates/{scenario}_{key}.json",
    "utility": "results/natural/{exp}/utility/{scenario}_{key}.csv",
    "one_run_scores": "results/one_run/{exp}/scores/{kind}_{key}.npz",
    "one_run": "results/one_run/{exp}/estimates/{kind}_{key}.json",
    "s1_calibration": "results/accounting/s1/{key}.json",
    "s1_scores": "results/s1/scores/{key}.npz",
    "s1_estimates": "results/s1/estimates/{key}.json",
    "ratio_grid_row": "results/accounting/ratio_grid/q{q}.csv",
    "deep_canaries": "results/deep/canaries.npz",
    "deep_pretrained": "results/deep/pretrained.npz",
    "deep_audit": "results/deep/audits/{audit}.npz",
    "deep_bounds": "results/deep/bounds/{audit}.json",
    "reconstruction_units": "results/reconstruction/{name}_units.csv",
    "reconstruction_summary": "results/reconstruction/{name}.json",
    "figure": "results/figures/{name}.{ext}",
    "report": "results/report.{ext}",
}

#: What a key looks like where an artifact depends on none of the knobs.
_EMPTY_KEY = "any"


#: Reproduction switches of params.yaml ``natural``: where the paper's code differs from its
#: text, key -> (what it chooses, the text's choice (default), the code's choice).
SWITCHES: dict[str, tuple[str, str, str]] = {
    "input_score": ("S3/S5 score", "logit-difference", "log-odds"),   # subaudit.engine.INPUT_SCORES
    "s2_coordinate": ("S2 coordinate", *S2_COORDINATES),
    "reference": ("reference model", "full-batch", "per-q"),
}


def switch_settings(natural: Mapping[str, Any]) -> dict[str, str]:
    """What each reproduction switch is set to, and whose choice that is, for a report; with
    each experiment's S5 pool and input-canary rate."""
    out = {}
    for key, (what, text, code) in SWITCHES.items():
        whose = {text: "the paper's text", code: "the paper's code"}.get(natural[key], "neither")
        out[f"{what} (natural.{key})"] = f"{natural[key]} ({whose})"
    for name, exp in natural["experiments"].items():
        out[f"S5 pool, {name} (s5_pool)"] = str(exp.get("s5_pool", f"all {exp['n_aux']} auxiliary records"))
        out[f"input canary rate, {name} (canary_sampling_rate)"] = str(
            exp.get("canary_sampling_rate", "the data's q"))
    return out


#: Reference models (params.yaml natural.reference): one full-batch model per (T, k, lr), or,
#: as the paper's code, one minibatch model per q, so the reference, the target and the
#: canaries crafted on them depend on q too.
REFERENCES = SWITCHES["reference"][1:]


def depends(artifact: str, reference: str = "full-batch") -> tuple[str, ...]:
    """Knobs ``artifact`` depends on (:data:`DEPENDS`) under the ``reference`` choice."""
    if reference not in REFERENCES:
        raise ParameterError("reference", reference, "one of " + ", ".join(REFERENCES))
    knobs = DEPENDS[artifact]
    if reference == "per-q" and artifact in ("reference", "target"):
        return tuple(k for k in KNOBS if k in knobs or k == "q")
    return knobs


def canary_knobs(scenario: Scenario, reference: str = "full-batch") -> tuple[str, ...]:
    """Knobs a scenario's canary depends on (its path key) under the ``reference`` choice
    (natural.reference): its own crafting run (per q), the calibrated noise it is crafted
    against (``noisy``) and the reference model."""
    own = (("q", "clip", "steps", "lr") if scenario.per_q else ()) + (
        DEPENDS["calibration"] if scenario.noisy else ())
    ref = depends("reference", reference) if scenario.needs_reference else ()
    return tuple(k for k in KNOBS if k in own or k in ref)


def key(knobs: Sequence[str], values: Mapping[str, Any]) -> str:
    """The key of an artifact that depends on ``knobs``, from the setting's ``values``."""
    unknown = [k for k in knobs if k not in KNOBS]
    if unknown:
        raise ParameterError("knob", unknown[0], "one of " + ", ".join(KNOBS))
    parts = [KNOBS[k][0] + (str(int(values[k])) if KNOBS[k][1] is int else fmt(values[k]))
             for k in KNOBS if k in knobs]
    return "_".join(parts) or _EMPTY_KEY


_PREFIX = {prefix: name for name, (prefix, _) in KNOBS.items()}
_TOKEN = re.compile(r"^(" + "|".join(sorted(_PREFIX, key=len, reverse=True)) + r")(.+)$")


def parse_key(text: str, knobs: Sequence[str] | None = None) -> dict[str, Any]:
    """Knob values of a key (inverse of :func:`key`); ``knobs``: the ones it must hold.

    A key that is not canonical (knobs out of order, a number written another way,
    other knobs than ``knobs``) is refused, so one artifact has one path.
    """
    values: dict[str, Any] = {}
    if text != _EMPTY_KEY:
        for token in text.split("_"):
            m = _TOKEN.match(token)
            if not m:
                raise ParameterError("key", text, "knobs written as " + ", ".join(
                    f"{p}<{n}>" for n, (p, _) in KNOBS.items()) + " joined by '_'")
            name = _PREFIX[m.group(1)]
            try:
                values[name] = KNOBS[name][1](m.group(2))
            except ValueError:
                raise ParameterError(f"key {text}: {name}", m.group(2),
                                     f"a {KNOBS[name][1].__name__}") from None
    if knobs is not None and set(values) != set(knobs):
        raise ParameterError("key", text, "exactly the knobs " + ", ".join(knobs))
    if key(list(values), values) != text:
        raise ParameterError("key", text, f"the canonical form {key(list(values), values)!r}")
    return values


def path(artifact: str, **values: Any) -> str:
    """Path of an artifact (:data:`PATHS`) with its wildcards filled from ``values``; a value
    may itself be a wildcard (``name="{name}"``), and a wildcard not given stays one."""
    return PATHS[artifact].format_map(_KeepWildcards(values))


class _KeepWildcards(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Setting:
    """One natural-data audit: an experiment, a scenario and every knob's value."""

    experiment: str
    scenario: str
    q: float
    clip: float
    steps: int
    every: int
    lr: float
    target_epsilon: float
    runs: int
    repeat: int

    def key(self, artifact: str, knobs: Sequence[str] | None = None,
            reference: str = "full-batch") -> str:
        """Key of one of this setting's artifacts (``knobs`` for a canary) under the
        ``reference`` choice."""
        return key(depends(artifact, reference) if knobs is None else knobs, asdict(self))


#: Knobs of a setting that a variation may override, with the experiment key they replace.
VARIABLE = {"q": "sampling_rates", "clip": "clip", "steps": "steps", "every": "every",
            "lr": "lr", "target_epsilon": "target_epsilon", "runs": "runs"}


def grid(experiments: Mapping[str, Mapping[str, Any]], scenarios: Sequence[str], *,
         target_epsilon: float, runs: int, repeats: int,
         variations: Iterable[Mapping[str, Any]] = ()) -> list[Setting]:
    """The audit settings: the base grid, then each declared variation, de-duplicated.

    The base grid is every experiment x scenario x its sampling rates x repeat.  A
    variation (:func:`expand`) overrides knobs with lists of values for some
    ``experiments`` and ``scenarios`` (default: all) and adds the product.
    """
    out: dict[Setting, None] = {}
    for var in [{}, *variations]:
        out.update(dict.fromkeys(expand(experiments, scenarios, var, target_epsilon=target_epsilon,
                                        runs=runs, repeats=repeats)))
    return list(out)


def experiment_scenarios(experiment: Mapping[str, Any], scenarios: Sequence[str]) -> list[str]:
    """Those of ``scenarios`` (natural.scenarios) an experiment audits: its own ``scenarios``
    (absent or null: all), in natural.scenarios' order."""
    own = experiment.get("scenarios") or scenarios
    return [s for s in scenarios if s in own]


def expand(experiments: Mapping[str, Mapping[str, Any]], scenarios: Sequence[str],
           variation: Mapping[str, Any], *, target_epsilon: float, runs: int,
           repeats: int) -> list[Setting]:
    """The settings of one variation: the product of its knob lists (``sampling_rates``,
    ``clip``, ``steps``, ``every``, ``lr``, ``target_epsilon``, ``runs``; the experiment's
    value where it gives none) over its ``experiments``, ``scenarios`` and ``repeats``
    (default: all experiments, ``scenarios``, ``repeats``), each experiment's among the
    scenarios it audits (its own ``scenarios``; absent or null: all)."""
    out: list[Setting] = []
    for exp in variation.get("experiments", list(experiments)):
        if exp not in experiments:
            raise ParameterError("variations.experiments", exp, "one of " + ", ".join(experiments))
        base = {**experiments[exp], "target_epsilon": target_epsilon, "runs": runs}
        lists = {name: list(variation.get(src, base[src] if name == "q" else [base[src]]))
                 for name, src in VARIABLE.items()}
        for scenario in variation.get("scenarios", experiment_scenarios(experiments[exp], scenarios)):
            for combo in itertools.product(*lists.values(), range(variation.get("repeats", repeats))):
                knobs = dict(zip([*lists, "repeat"], combo))
                out.append(Setting(experiment=exp, scenario=scenario, **_typed(knobs)))
    return out


def _typed(knobs: Mapping[str, Any]) -> dict[str, Any]:
    return {f.name: (int(knobs[f.name]) if f.type in ("int", int) else float(knobs[f.name]))
            for f in fields(Setting) if f.name in knobs}


def settings_from_config(natural: Mapping[str, Any]) -> list[Setting]:
    """:func:`grid` of params.yaml's ``natural`` section."""
    return grid(natural["experiments"], natural["scenarios"],
                target_epsilon=natural["target_epsilon"], runs=natural["runs"],
                repeats=natural["repeats"], variations=natural.get("variations", ()))


#: The knobs an ablation figure varies (params.yaml ``ablations``; paper Figs A2-A4).
ABLATED = ("clip", "steps", "lr")


def ablation_every(experiment: Mapping[str, Any], steps: int) -> int:
    """The scoring interval k at T = ``steps``: the experiment's k scaled with T (the paper
    scores T = 500 every 25 steps and T = 2,500 every 125), at least 1."""
    return max(1, int(steps) * int(experiment["every"]) // int(experiment["steps"]))


def ablation_settings(natural: Mapping[str, Any], ablations: Mapping[str, Any],
                      knob: str) -> list[Setting]:
    """The settings of one ablation figure: the ablated experiment at the ablation's q, each
    value of ``knob`` (and, for T, its scaled k), the scenarios ``ablations.scenarios``,
    ``ablations.repeats`` repeats; everything else as the base audit, so the base value reuses the base audit."""
    if knob not in ABLATED:
        raise ParameterError("ablation knob", knob, "one of " + ", ".join(ABLATED))
    exp = ablations["experiment"]
    spec = ablations[knob]
    base = natural["experiments"][exp]
    out: list[Setting] = []
    for value in spec["values"]:
        variation: dict[str, Any] = {"experiments": [exp], "sampling_rates": [spec["q"]],
                                     knob: [value], "repeats": ablations["repeats"]}
        if knob == "steps":
            variation["every"] = [ablation_every(base, value)]
        out += expand(natural["experiments"], ablations["scenarios"], variation,
                      target_epsilon=natural["target_epsilon"], runs=natural["runs"],
                      repeats=ablations["repeats"])
    return out


# --------------------------------------------------------------------------- seeds

#: Keys of each derived seed, after the root seed: (literal or knob name) in order.
#: Knob values enter as their key text (q '1', eps '4') or as int (repeat); these are
#: the derivations the published results were made with.
SEED_KEYS: dict[str, tuple[str, ...]] = {
    "split": ("'split", "experiment"),
    "reference": ("'natural", "experiment", "'reference"),
    "canary": ("'natural", "experiment", "scenario", "q?"),
    "train": ("'natural", "experiment", "scenario", "q", "repeat"),
    "target-world": ("'natural", "experiment", "'target-world", "q", "repeat"),
    "utility": ("'natural", "experiment", "scenario", "'utility"),
    "s1": ("'s1", "q", "target_epsilon", "repeat"),
    "one-run": ("'one-run", "experiment", "kind", "q"),
    "reconstruction": ("'reconstruction", "experiment"),
    "deep": ("'deep",),
}


def seed(root: int, purpose: str, values: Mapping[str, Any]) -> int:
    """The seed of one job's randomness (:data:`SEED_KEYS`); ``'x`` is a literal, ``q?``
    a knob used only when ``values`` has it (S2 is crafted per q, S3-S5 are not)."""
    if purpose not in SEED_KEYS:
        raise ParameterError("seed purpose", purpose, "one of " + ", ".join(SEED_KEYS))
    keys: list[object] = []
    for item in SEED_KEYS[purpose]:
        if item.startswith("'"):
            keys.append(item[1:])
            continue
        name = item.rstrip("?")
        if name not in values:
            if item.endswith("?"):
                continue
            raise ParameterError(f"seed {purpose}", name, "a value for every key of "
                                 + ", ".join(SEED_KEYS[purpose]))
        v = values[name]
        keys.append(int(v) if name == "repeat" else fmt(v) if name in KNOBS else str(v))
    return derive_seed(root, *keys)


def target_groups(settings: Iterable[Setting],
                  scenarios: Mapping[str, Scenario]) -> dict[tuple[str, str], tuple[str, ...]]:
    """Settings whose z-world runs are trained once: (experiment, shard key) -> the scenarios
    (in the order given) that share the target's world (:attr:`Scenario.shares_target`), where
    at least two of them audit that setting; the others train both worlds themselves."""
    groups: dict[tuple[str, str], list[str]] = {}
    for s in settings:
        if scenarios[s.scenario].shares_target:
            members = groups.setdefault((s.experiment, s.key("shard")), [])
            if s.scenario not in members:
                members.append(s.scenario)
    return {k: tuple(v) for k, v in groups.items() if len(v) > 1}
