# Shared helpers: the audit settings derived from config, the one accessor through which rules
# get knob values and seeds, and the lists of targets.
#
# Paths and seeds come from subaudit.pipeline.settings (written once there); a rule's params: entry is
# knob("name") or seed("purpose"): one value each, so rerun detection stays exact.

import functools
import math

from subaudit.data import own_features
from subaudit.pipeline import costs
from subaudit.pipeline import settings as S
from subaudit.reporting.figure_registry import experiment_figure, figures_for
from subaudit.data import SOURCES
from subaudit.estimation import ESTIMATORS
from subaudit.scenarios.one_run_canaries import CANARY_KINDS
from subaudit.scenarios.deep_canaries import DEEP_KINDS
from subaudit.scenarios.deep_cases import case_audits, case_setting, case_training, group_canaries
from subaudit.pipeline.costs import audit_job_resources, canaries_job_resources, pretrain_job_resources
from subaudit.scenarios import SCENARIOS
from subaudit.schedule import checkpoints
from subaudit.pipeline.prefetch import downloads

fmt = S.fmt
PATHS = S.PATHS
# Priority of the jobs DP training waits for (features, reference, canary, calibration): run
# them as soon as they can, so that the run ends on training shards side by side, not on a
# canary crafted late with one core idle (measured in the default run before: the last S6
# crafting started at 31 min, 105 s with the other core mostly idle, then its two shards).
UNLOCKS = 10


wildcard_constraints:
    exp=r"[A-Za-z][A-Za-z0-9-]*",
    scenario="|".join(SCENARIOS),
    key=r"[A-Za-z0-9.+-]+(_[A-Za-z0-9.+-]+)*",
    q=r"[0-9.e+-]+",
    name=r"[^/]+",
    lo=r"\d+",
    hi=r"\d+",


S1 = config["s1"]
GRID = config["ratio_grid"]
NAT = config["natural"]
EXPERIMENTS = NAT["experiments"]
# The digests params.yaml gives for sources without a pinned one (what `subaudit prefetch` checks).
SOURCE_CHECKSUMS = {a.source: a.checksum for a in downloads(config)[0]}
# The reference model: full-batch, or per q as the paper's code (subaudit.pipeline.settings.depends).
REF = NAT["reference"]

# What S1 files of one q exist: a calibration per target, scores and estimates per repeat.
_S1_FILES = {
    "calibration": (PATHS["s1_calibration"], ("target_epsilon",)),
    "scores": (PATHS["s1_scores"], ("target_epsilon", "repeat")),
    "estimates": (PATHS["s1_estimates"], ("target_epsilon", "repeat")),
}


def s1_values(q):
    """Knob values of the S1 audits at q (a wildcard string), in file order."""
    return [{"q": float(q), "target_epsilon": e, "repeat": r}
            for e in S1["target_epsilons"] for r in range(S1["repeats"])]


def s1_files(kind):
    """The S1 files of one kind at the wildcard q (q is a key's first knob)."""
    template, knobs = _S1_FILES[kind]
    keys = dict.fromkeys(S.key(knobs, v) for v in s1_values(1.0))     # one per target for calibrations
    return [template.format(key=f"q{{q}}_{k}") for k in keys]


def s1_all(kind):
    """The S1 files of one kind at every configured q."""
    return [f.format(q=fmt(q)) for q in S1["sampling_rates"] for f in s1_files(kind)]


S1_CHECKPOINTS = sorted({*range(S1["every"], S1["steps"] + 1, S1["every"]), S1["steps"]})

# Natural-data audits: the base grid of every experiment, then the declared variations.
BASE = S.settings_from_config({**NAT, "variations": []})
SETTINGS = S.settings_from_config(NAT)
# GPUs a features / training / utility job asks a cluster for (natural.device).
GPUS = 0 if NAT["device"] == "cpu" else 1


def values(wc):
    """Knob values of the artifact a job makes: its experiment's fixed settings (model,
    optimiser, data), its scenario, and exactly the knobs its key carries."""
    out = {}
    if "exp" in wc.keys():
        fixed = {k: v for k, v in EXPERIMENTS[wc.exp].items() if k not in S.VARIABLE.values()}
        out.update(fixed, experiment=wc.exp)
    if "scenario" in wc.keys():
        out["scenario"] = wc.scenario
    if "key" in wc.keys():
        out.update(S.parse_key(wc.key))
    return out


def knob(name):
    """A params: entry: the value of one knob (or fixed experiment setting) of the job."""
    return lambda wc: values(wc)[name]


def knobs(*names):
    """params: entries, one a knob (:func:`knob`), in that order: ``**knobs("hidden", "lr")``."""
    return {name: knob(name) for name in names}


#: The knobs a DP training job reads (train_target, train_shard, utility): its model, optimiser,
#: DP-SGD setting and scoring interval.
TRAINING_KNOBS = ("hidden", "optimizer", "init", "clip", "lr", "steps", "every", "q")


def seed(purpose):
    """A params: entry: the job's seed (subaudit.pipeline.settings.seed)."""
    return lambda wc: S.seed(config["seed"], purpose, values(wc))


def artifact(name, wc, knobs=None, **extra):
    """Path of an upstream artifact of the same setting as the job's wildcards."""
    v = values(wc)
    knobs = S.depends(name, REF) if knobs is None else knobs
    fields = {"exp": v.get("experiment"), "scenario": v.get("scenario"), **extra}
    return S.path(name, key=S.key(knobs, v), **fields)


def setting_path(name, setting, **extra):
    """Path of one artifact of a Setting."""
    return S.path(name, exp=setting.experiment, scenario=setting.scenario,
                  key=setting.key(name, reference=REF), **extra)


# Experiments on a user's own features file, and on a packaged or downloaded source.
OWN = [e for e, v in EXPERIMENTS.items() if v["source"] == own_features.NAME]
ARCHIVED = [e for e in EXPERIMENTS if e not in OWN]


def one_of(names):
    """A wildcard constraint matching exactly these names (nothing when there are none)."""
    return "|".join(names) or "(?!)"


def family(exp):
    """What kind of data an experiment audits (the figure titles say it)."""
    source = EXPERIMENTS[exp]["source"]
    return "own features" if source == own_features.NAME else SOURCES[source].family


def raw_archive(exp):
    """Where the acquire rule puts the source archive of an experiment."""
    source = EXPERIMENTS[exp]["source"]
    return S.path("raw", source=source, filename=SOURCES[source].filename)


def source_checksum(source):
    """A checksum params.yaml gives for a source without a pinned one (else None)."""
    return SOURCE_CHECKSUMS.get(source)


def target_group(wc):
    """The scenarios whose z-world runs the job's setting trains once (none: each trains both)."""
    return TARGET_GROUPS.get((wc.exp, S.key(S.depends("shard", REF), values(wc))), ())


@functools.cache
def model_sizes(exp):
    """Layer sizes of an experiment's model (read once per process)."""
    return S.model_sizes(EXPERIMENTS[exp])


def requests(model):
    """resources: entries from a job's cost model (subaudit.pipeline.costs): its memory, runtime,
    expected seconds and output size; ``model`` is a function of the job's wildcards (evaluated
    once per job, not once per entry), or the requests themselves."""
    if not callable(model):
        return {key: model[key] for key in REQUEST_KEYS}
    done = {}

    def get(wc):
        key = tuple(wc.items())
        if key not in done:
            done[key] = model(wc)
        return done[key]

    return {key: (lambda wc, key=key: get(wc)[key]) for key in REQUEST_KEYS}


#: The resources a cost model gives (subaudit.job_requests.job_request).
REQUEST_KEYS = ("mem_mb", "runtime", "expected_s", "out_kb")


def split_records(exp):
    """Records of an experiment's split (train, aux, test): what its features job reads."""
    e = EXPERIMENTS[exp]
    return int(e["n_train"]) + int(e["n_aux"]) + int(e["n_test"])


def feature_values(exp):
    """Values of an experiment's features file (its split's records x the model's inputs)."""
    return split_records(exp) * model_sizes(exp)[0]


def checkpoint_scores(wc, v):
    """A run's scores in a training job: one at every checkpoint of its setting ``v``."""
    return len(checkpoints(int(v["steps"]), int(v.get("every", v["steps"]))))


def training_request(runs, records=lambda wc, v: int(v["n_train"]), scores=checkpoint_scores,
                     span=lambda wc: True):
    """A training job's cost model (subaudit.pipeline.costs): ``runs(wc)`` runs of the job's
    setting (on ``records`` records) on natural.device, within natural.memory_mb, ``scores`` a run;
    ``span(wc)``: whether a linear head may train in its records' span (no trap canary, nothing
    that needs the full parameters: costs.trained_parameters)."""

    def request(wc):
        v = values(wc)
        sizes, n = model_sizes(wc.exp), records(wc, v)
        return costs.training_job_resources(sizes, n, float(v["q"]), runs(wc), int(v["steps"]), NAT["device"],
                                            NAT["memory_mb"], scores(wc, v),
                                            costs.trained_parameters(sizes, n, v["optimizer"], span(wc)))

    return request


def reference_request(wc):
    """The reference model's requests (subaudit.pipeline.costs.reference_job_resources)."""
    v = values(wc)
    return costs.reference_job_resources(model_sizes(wc.exp), int(v["n_train"]), float(v.get("q", 1.0)),
                                         int(v["steps"]), feature_values(wc.exp))


def craft_request(wc):
    """A scenario's crafting requests: its registered crafting work (none: seconds)."""
    v, scenario = values(wc), SCENARIOS[wc.scenario]
    sizes, n = model_sizes(wc.exp), int(v["n_train"])
    work = (scenario.crafting_work(crafting_options(wc.exp, wc.scenario), int(v["steps"]), n, sizes)
            if scenario.crafting_work else (0.0, 0.0))
    return costs.craft_job_resources(work, sizes, n, feature_values(wc.exp))


def features_request(wc):
    """A features job's requests: its split's records through the backbone on natural.device."""
    e = EXPERIMENTS[wc.exp]
    src = SOURCES[e["source"]]
    per_record = src.width or math.prod(src.shape or (64,))   # text: a sentence's tokens
    return costs.features_job_resources(e.get("backbone", "none"), split_records(wc.exp),
                                        int(e.get("resolution", 224)), NAT["device"], per_record)


def s1_request(wc):
    """The S1 simulations of one q (subaudit.pipeline.costs.simulate_s1_job_resources)."""
    return costs.simulate_s1_job_resources(len(s1_values(wc.q)), S1["runs_per_world"], S1_CHECKPOINTS,
                                          float(wc.q))


def s1_calibration_request(wc):
    """Per target: sigma, then eps_S, eps_AR and group epsilon at it."""
    return costs.accounting_job_resources(float(wc.q), S1["steps"], len(S1["target_epsilons"]), 0)


def natural_calibration_request(wc):
    """Sigma, then eps_S and eps_AR at every checkpoint."""
    v = values(wc)
    return costs.accounting_job_resources(v["q"], v["steps"], 1, 2 * len(checkpoints(v["steps"], v["every"])))


def grid_row_request(wc):
    """eps_S and eps_AR at every noise multiplier."""
    return costs.accounting_job_resources(float(wc.q), GRID["steps"], 0, 2 * len(GRID["noise_multipliers"]))


def world_runs(wc, bit):
    """The runs of [lo, hi) in one world: with z (``bit`` 1) or z' (0), by the runs' bits."""
    from subaudit.pipeline.score_files import run_bits

    return int((run_bits(range(int(wc.lo), int(wc.hi))) == bit).sum())


def shard_runs(wc):
    """The runs a shard trains: those with z' where train_target trains its runs with z (for
    several scenarios at once), else all."""
    return world_runs(wc, 0) if wc.scenario in target_group(wc) else int(wc.hi) - int(wc.lo)


def target_runs(wc):
    """The runs train_target trains: those with z."""
    return world_runs(wc, 1)


def nat_shards(runs):
    """(lo, hi) run ranges of one audit setting of R = runs."""
    from subaudit.pipeline.score_files import shard_bounds

    return shard_bounds(runs, NAT["shard_size"])


# --------------------------------------------------------------------------- input functions


def crafting_options(exp, scenario):
    """A scenario's crafting options: from its experiment, else from natural (absent: None)."""
    return {k: EXPERIMENTS[exp].get(k, NAT.get(k)) for k in SCENARIOS[scenario].options}


def canary_rate(wc):
    """The input canary's own Poisson rate (experiment canary_sampling_rate; None: the data's q)."""
    if "scenario" in wc.keys() and not SCENARIOS[wc.scenario].input_canary:
        return None
    return EXPERIMENTS[wc.exp].get("canary_sampling_rate")


def craft_inputs(wc):
    """Features; the reference model and target for scenarios that need them; the calibrated
    sigma for scenarios crafted against the noise."""
    out = {"features": S.path("features", exp=wc.exp)}
    if SCENARIOS[wc.scenario].needs_reference:
        out["reference"] = artifact("reference", wc)
        out["target"] = artifact("target", wc)
    if SCENARIOS[wc.scenario].noisy:
        out["calibration"] = artifact("calibration", wc)
    return out


def training_inputs(wc):
    """What training a setting needs: features, canary, calibrated sigma, and the target
    when the scenario's canary replaces it in D."""
    out = {
        "features": S.path("features", exp=wc.exp),
        "canary": artifact("canary", wc, S.canary_knobs(SCENARIOS[wc.scenario], REF)),
        "calibration": artifact("calibration", wc),
    }
    if SCENARIOS[wc.scenario].removes_target:
        out["target"] = artifact("target", wc)
    return out


def target_inputs(wc):
    """What training the runs with the target z of a setting needs: features, calibrated sigma,
    the target, and the canary of each scenario sharing that world (to score them)."""
    return {
        "features": S.path("features", exp=wc.exp),
        "calibration": artifact("calibration", wc),
        "target": artifact("target", wc),
        "canaries": [artifact("canary", wc, S.canary_knobs(SCENARIOS[s], REF), scenario=s)
                     for s in target_group(wc)],
    }


def target_shards(wc):
    """The shards of runs with the target z an audit setting shares with other scenarios (or none)."""
    if wc.scenario not in target_group(wc):
        return []
    return [artifact("target_shard", wc, lo=lo, hi=hi) for lo, hi in nat_shards(values(wc)["runs"])]


def experiment_settings(name):
    """The base-grid settings of the experiment a figure shows."""
    return [s for s in BASE if s.experiment == FIGS[name].experiment]


# Ablations (params.yaml ablations): the settings of each ablation figure, by ablated knob.
ABL = config["ablations"]
ABLATIONS = {k: S.ablation_settings(NAT, ABL, k) for k in S.ABLATED}


# Settings whose runs with the target z are trained once for the scenarios sharing that world
# (the grid, its variations and the ablations): (experiment, shard key) -> scenarios
# (subaudit.pipeline.settings.target_groups).
TARGET_GROUPS = S.target_groups([*SETTINGS, *(s for group in ABLATIONS.values() for s in group)], SCENARIOS)


def ablation_calibrations(knob):
    """Each value of an ablated knob with the calibration file of its settings."""
    return {getattr(s, knob): setting_path("calibration", s) for s in ABLATIONS[knob]}


def runs_settings():
    """Fig 5's audits: the base settings of the ablated experiment (every q and repeat)."""
    return [s for s in BASE if s.experiment == ABL["experiment"]]


def utility_settings(name):
    """A utility figure's settings: its experiment's first q, the scenarios it shows."""
    first = [s for s in experiment_settings(name) if s.repeat == 0]
    return [s for s in first if s.q == first[0].q and SCENARIOS[s.scenario].in_utility]


# --------------------------------------------------------------------------- targets

# Figures (subaudit.reporting.figure_registry): S1, the ratio grid, each experiment's epsilon-vs-step
# figure and its other registered figures (Fig A1's utility runs for image).
FIGS = {f.name: f for f in figures_for(EXPERIMENTS, config["reconstruction"]["experiment"] is not None,
                                       config["deep"]["source"] is not None)}


def figs(kind):
    """Names of this configuration's figures of one plot kind (a wildcard constraint)."""
    return one_of([f.name for f in FIGS.values() if f.kind == kind])


def figure_files():
    """A figure rule's outputs: results/figures/{name}.png (in Snakemake's report), .pdf and the
    .csv of its numbers (output: **figure_files())."""
    return {"png": report(S.path("figure", ext="png"), caption="../report/figure.rst", category="Figures"),
            "pdf": S.path("figure", ext="pdf"), "csv": S.path("figure", ext="csv")}


#: A figure rule's log, benchmark and requests (seconds of plotting, on the machine that runs
#: Snakemake).
FIGURE_LOG = "logs/figures/{name}.log"
FIGURE_BENCHMARK = "logs/benchmarks/figures/{name}.tsv"
FIGURE_RESOURCES = {"mem_mb": 2000, "runtime": 10}


FIGURES = expand(PATHS["figure"], name=list(FIGS), ext=["png", "pdf", "csv"])
REPORT = [S.path("report", ext=ext) for ext in ("md", "html", "json")]


def report_figures():
    """Name, kind, caption, paper number and panel knob of each figure, for the report."""
    return [{"name": f.name, "kind": f.kind, "caption": f.caption, "paper": f.paper,
             "panel": f.knob or "q"} for f in FIGS.values()]


# The estimator the report's verdicts use: the first valid one of estimators.
REPORT_ESTIMATOR = next(e for e in config["estimators"] if ESTIMATORS[e].valid)
# Audits of the declared variations (not in a paper figure): their estimates.
VARIATION_ESTIMATES = [setting_path("estimates", s) for s in SETTINGS if s not in set(BASE)]


# --------------------------------------------------------------------------- one-run audits

ONE = config["one_run"]


def one_run_settings():
    """The base settings of the one-run experiment, one per q (the knobs of its R-run audits)."""
    out = {}
    for s in BASE:
        if s.experiment == ONE["experiment"]:
            out.setdefault(s.key("one_run"), s)
    return list(out.values())


def one_run_files(artifact_name):
    """One file per (kind, q) of the one-run audits."""
    return [S.path(artifact_name, exp=s.experiment, kind=kind, key=s.key("one_run"))
            for kind in ONE["kinds"] for s in one_run_settings()]


# --------------------------------------------------------------------------- deep-network audits


def deep_group(wc):
    """The input kinds of the deep audit ``wc``'s training and whether it holds gradient canaries
    (its group, over its case's kinds: deep.cases.<case>.kinds, else deep.kinds)."""
    return group_canaries(wc.group, case_setting(config["deep"], wc.case)["kinds"])
