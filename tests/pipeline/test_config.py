"""params.yaml schema: the shipped files validate; every kind of bad value names its key."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from conftest import loaded_modules, paper_dry_run
from subaudit.pipeline.config import ConfigError, load_params, validate_params


@pytest.fixture()
def params(repo_root):
    return load_params(repo_root / "params.yaml")


def test_shipped_params_and_presets_validate(repo_root):
    load_params(repo_root / "params.yaml")
    from snakemake.utils import update_config  # how Snakemake merges --configfile

    presets = sorted((repo_root / "presets").glob("*.yaml"))
    for combo in [[p] for p in presets] + [presets]:
        merged = load_params(repo_root / "params.yaml")
        for preset in combo:
            update_config(merged, yaml.safe_load(preset.read_text()))
        validate_params(merged, source=" + ".join(p.name for p in combo))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda p: p["s1"].__setitem__("sampling_rates", [1.0, 1.5]), "s1.sampling_rates[1] = 1.5"),
        (lambda p: p["s1"].__setitem__("sampling_rates", [0.0]), "s1.sampling_rates[0] = 0.0"),
        (lambda p: p["ratio_grid"].__setitem__("noise_multipliers", [-1.0]),
         "ratio_grid.noise_multipliers[0] = -1.0"),
        (lambda p: p["s1"].__setitem__("adjacency", "swap"), "s1.adjacency = 'swap'"),
        (lambda p: p.__setitem__("estimators", ["bayes"]), "estimators[0] = 'bayes'"),
        (lambda p: p.__setitem__("delta", 1.5), "delta = 1.5"),
        (lambda p: p["s1"].__setitem__("runs_per_world", 1), "s1.runs_per_world = 1"),
        (lambda p: p.__setitem__("seeds", 3), "unknown key seeds"),
        (lambda p: p["s1"].__setitem__("step", 3), "unknown key s1.step"),
        (lambda p: p["s1"].pop("repeats"), "missing key s1.repeats"),
        (lambda p: p.__setitem__("estimators", ["paper"]),
         "estimators = ['paper'] is invalid; allowed: a list holding a valid estimator (auc)"),
        (lambda p: p["ablations"].__setitem__("experiment", "audio"),
         "ablations.experiment = 'audio' is invalid; allowed: one of image, text, tabular"),
        (lambda p: p["ablations"].__setitem__("runs", [100, 251]),
         "ablations.runs[1] = 251 is invalid; allowed: an even number of runs, at most natural.runs"),
        (lambda p: p["ablations"].__setitem__("runs", [2000]), "ablations.runs[0] = 2000"),
        (lambda p: p["ablations"].__setitem__("scenarios", ["S2", "S9"]),
         "ablations.scenarios[1] = 'S9'"),
        (lambda p: p["natural"]["experiments"]["text"].__setitem__("scenarios", ["S2", "S8"]),
         "natural.experiments.text.scenarios[1] = 'S8' is invalid; allowed: one of natural.scenarios"),
        (lambda p: p["reconstruction"].__setitem__("experiment", "text"),
         "reconstruction.experiment = 'text' is invalid; allowed: an image experiment of "
         "natural.experiments (image) or null"),
        (lambda p: p["reconstruction"].__setitem__("fire_rate", 0.0), "reconstruction.fire_rate = 0.0"),
        (lambda p: (p["natural"].__setitem__("s6_objective", "linearised"),
                    p["natural"]["experiments"]["tabular"].__setitem__("scenarios", None)),
         "natural.s6_objective = 'linearised' is invalid; allowed: unrolled while "
         "natural.experiments.tabular audits S6 and has hidden layers"),
        (lambda p: p["natural"].__setitem__("s6_objective", "closed-form"), "natural.s6_objective"),
        (lambda p: p["natural"]["experiments"]["text"].__setitem__("s6_lr", 0), "s6_lr"),
        (lambda p: (p["natural"]["experiments"]["tabular"].__setitem__("hidden", [64, 32]),
                    p["natural"]["experiments"]["tabular"].__setitem__("scenarios", None)),
         "natural.experiments.tabular.hidden = [64, 32] is invalid; allowed: [] or one hidden layer"),
        (lambda p: p["deep"].__setitem__("physical_batch", 0), "deep.physical_batch = 0 is invalid"),
        (lambda p: p["deep"].__setitem__("gradient_width", 17), "deep.gradient_width = 17"),
        (lambda p: p["deep"].__setitem__("trainings", "paired"), "deep.trainings = 'paired'"),
        (lambda p: p["deep"].__setitem__("gradient_width", 4),
         "deep.gradient_canaries = 10000 is invalid; allowed: at most 6502 slots of deep.gradient_width = 4"),
        (lambda p: p["deep"]["cases"]["gap"].__setitem__("kinds", ["gradient", "loud"]),
         "deep.cases.gap.kinds[1] = 'loud' is invalid; allowed: one of random, mislabeled, metagradient, gradient"),
        (lambda p: p["deep"]["cases"]["gap"].__setitem__("games", ["attribute"]),
         "deep.cases.gap.games[0] = 'attribute' is invalid; allowed: one of membership, substitute"),
        (lambda p: p["deep"]["cases"]["gap"].__setitem__("gradient_canaries", 30000),
         "deep.cases.gap.gradient_canaries = 30000 is invalid; allowed: at most 26010 slots"),
        (lambda p: p["deep"]["cases"].__setitem__("warm", p["deep"]["cases"]["scratch"]),
         "deep.cases.warm = 'warm' is invalid; allowed: cases named scratch, finetune, gap"),
        (lambda p: p["deep"]["metagradient"].__setitem__("network", "resnet-18"),
         "deep.metagradient.network = 'resnet-18' is invalid; allowed: one of cnn, resnet-9"),
        (lambda p: p["deep"]["metagradient"].__setitem__("base_from", "test"),
         "deep.metagradient.base_from = 'test' is invalid; allowed: one of public, train"),
        (lambda p: p["deep"]["metagradient"].__setitem__("base", 10**6),
         "deep.metagradient.base = 1000000 is invalid; allowed: at most deep.sizes.public = "),
        (lambda p: p["deep"].__setitem__("run_cases", ["scratch", "warm"]),
         "deep.run_cases[1] = 'warm' is invalid; allowed: one of deep.cases: scratch, finetune, gap"),
        (lambda p: p["deep"].__setitem__("run_cases", []), "deep.run_cases = [] is invalid"),
        (lambda p: p["natural"].__setitem__("run_experiments", ["image", "speech"]),
         "natural.run_experiments[1] = 'speech' is invalid; allowed: one of natural.experiments: image, text, tabular"),
        (lambda p: p["natural"].__setitem__("run_experiments", ["text", "tabular"]),   # what one_run audits is left out
         "one_run.experiment = 'image' is invalid; allowed: one of text, tabular"),
        (lambda p: p["ablations"]["clip"].__setitem__("values", [0.0]), "ablations.clip.values[0] = 0.0"),
        (lambda p: p["ablations"]["lr"].__setitem__("q", 1.5), "ablations.lr.q = 1.5"),
        (lambda p: p["ablations"]["steps"].__setitem__("values", [100.5]),
         "ablations.steps.values[0] = 100.5 is invalid; allowed: a whole number of steps"),
    ],
)
def test_bad_values_name_the_key(params, edit, expected):
    bad = copy.deepcopy(params)
    edit(bad)
    with pytest.raises(ConfigError) as info:
        validate_params(bad)
    assert expected in str(info.value)


@pytest.mark.parametrize(("edit", "key"), [
    (lambda p: p["deep"]["cases"]["scratch"].__setitem__("lr", float("nan")), "deep.cases.scratch.lr"),
    (lambda p: p["natural"].__setitem__("target_epsilon", float("inf")), "natural.target_epsilon"),
    (lambda p: p["natural"]["experiments"]["image"]["sampling_rates"].__setitem__(1, float("nan")),
     "natural.experiments.image.sampling_rates[1]"),
    (lambda p: p.__setitem__("delta", float("-inf")), "delta"),
])
def test_non_finite_numbers_are_refused_at_parse(params, edit, key):
    """NaN compares false with every schema bound, so it passed them (a NaN learning rate
    trained to NaN scores; an infinite target planned hundreds of jobs): now every number
    must be finite, and the message names the key."""
    bad = copy.deepcopy(params)
    edit(bad)
    with pytest.raises(ConfigError) as info:
        validate_params(bad)
    assert f"{key} = " in str(info.value) and "allowed: a finite number" in str(info.value)


def test_non_finite_yaml_fails_before_any_job(repo_root, tmp_path):
    """`.nan` in a --configfile: the dry run fails at parse, naming the key."""
    import subprocess
    import sys

    bad = tmp_path / "nan.yaml"
    bad.write_text("deep:\n  cases:\n    scratch:\n      lr: .nan\n")
    proc = subprocess.run([Path(sys.executable).parent / "snakemake", "-n", "--configfile", str(bad)],
                          cwd=repo_root, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "deep.cases.scratch.lr = nan is invalid; allowed: a finite number" in proc.stdout + proc.stderr


def test_allowed_values_are_listed(params):
    bad = copy.deepcopy(params)
    bad["s1"]["adjacency"] = "swap"
    with pytest.raises(ConfigError, match="one of substitute, add-remove"):
        validate_params(bad)
    bad = copy.deepcopy(params)
    bad["s1"]["sampling_rates"] = [2]
    with pytest.raises(ConfigError, match=r"> 0 and <= 1"):
        validate_params(bad)


@pytest.mark.parametrize("env_file", ["environment.yml", "environment-cpu.yml"])
def test_environment_files_pin_what_constraints_pin(repo_root, env_file):
    """The cluster environments install the versions CI tests (constraints.txt)."""
    import re

    pins = dict(re.findall(r"^([\w.-]+)==(\S+)$", (repo_root / "constraints.txt").read_text(), re.M))
    env = yaml.safe_load((repo_root / env_file).read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    got = dict(re.findall(r"^([\w.-]+)==([^+\s]+)", "\n".join(pip), re.M))
    assert set(pins) <= set(got), sorted(set(pins) - set(got))
    assert {k: got[k] for k in pins} == pins
    assert ("+cpu" in "\n".join(pip)) == env_file.endswith("-cpu.yml")


def test_the_hashed_lock_pins_what_constraints_pin(repo_root):
    """requirements.lock (scripts/setup.sh's hash-checked install): every version constraints.txt
    pins but torch (installed first, by the machine's build), each with a sha256; setup.sh picks
    it on the platform its header names."""
    import re

    pins = dict(re.findall(r"^([\w.-]+)==(\S+)$", (repo_root / "constraints.txt").read_text(), re.M))
    text = (repo_root / "requirements.lock").read_text()
    entries = re.findall(r"^([\w.-]+)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\\n)?)+)", text, re.M)
    locked = {name: version for name, version, _ in entries}
    assert len(entries) == text.count("=="), "an entry without a sha256"
    assert "torch" not in locked and {k: locked.get(k) for k in pins if k != "torch"} == {
        k: v for k, v in pins.items() if k != "torch"}
    assert re.search(r"^# platform: Linux-x86_64-cp3\d+$", text, re.M)
    setup = (repo_root / "scripts" / "setup.sh").read_text()
    # the installer of the lock is itself in the lock (pip installs it with its hashes first)
    assert "uv" in locked and "lock_entry uv" in setup
    assert '"$uv" pip install --python .venv/bin/python --require-hashes --no-deps -r requirements.lock' in setup
    assert "pip install --progress-bar off --require-hashes --no-deps -r requirements.lock" in setup  # uv cannot
    # setup.sh's lock_entry picks exactly uv's lines (its pin and every hash) out of the lock
    import subprocess

    program = re.search(r"awk -v name=\"\$1\" '([^']+)' requirements.lock", setup).group(1)
    picked = subprocess.run(["awk", "-v", "name=uv", program, "requirements.lock"], cwd=repo_root,
                            capture_output=True, text=True, check=True).stdout
    block = next(f"uv=={v} \\\n{h}" for n, v, h in entries if n == "uv")
    assert picked.rstrip("\n") == block.rstrip(" \\\n") and picked.count("--hash=sha256:") > 1


def test_switch_choices_are_the_schemas():
    from subaudit.pipeline.config import schema
    from subaudit.pipeline.settings import SWITCHES

    from subaudit.engine import INPUT_SCORES
    from subaudit.scenarios.s2 import S2_COORDINATES

    natural = schema()["properties"]["natural"]["properties"]
    for key, (_, text, code) in SWITCHES.items():
        assert natural[key]["enum"] == [text, code], key
    # the library's own names (it does not import the workflow's vocabulary)
    assert SWITCHES["input_score"][1:] == tuple(INPUT_SCORES)
    assert SWITCHES["s2_coordinate"][1:] == S2_COORDINATES


def test_core_preset_trains_only_the_papers_core(repo_root):
    """presets/core.yaml: S2-S5 shards on every experiment, nothing of S6, S7, the ablation
    trainings or the reconstruction (a dry run of the whole workflow)."""
    import subprocess
    import sys

    proc = subprocess.run([Path(sys.executable).parent / "snakemake", "-n", "--forceall",
                           "--configfile", "presets/core.yaml"], cwd=repo_root,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "rule reconstruction" not in out and "scenario=S6" not in out and "scenario=S7" not in out
    for exp in ("image", "text", "tabular"):
        for scenario in ("S2", "S3", "S4", "S5"):
            assert f"exp={exp}, scenario={scenario}" in out or f"scenario={scenario}, exp={exp}" in out, (exp, scenario)
    for knob in ("C1_", "C4_", "lr0.0005", "lr0.002", "T300"):
        assert knob not in out, knob


def test_no_deep_preset_leaves_the_deep_phase_out_of_the_paper_preset():
    full, out = paper_dry_run(), paper_dry_run("presets/no-deep.yaml")
    assert "rule deep_audit" in full and "rule deep_" not in out
    assert "rule train_shard" in out and "rule report" in out


def test_every_job_that_computes_is_benchmarked_beside_its_log():
    """Every job of the paper preset's plan but ``all`` (local ones too: figures, estimates, the
    report) has a ``benchmark:`` file, the mirror of its log (logs/X.log and
    logs/benchmarks/X.tsv), so each job's time is found from its log's name."""
    import re

    from subaudit.pipeline.plan import parse_dry_run

    jobs = parse_dry_run(paper_dry_run())
    for job in jobs:
        assert job.log and job.benchmark, job
        assert job.benchmark == re.sub(r"^logs/(.*)\.log$", r"logs/benchmarks/\1.tsv", job.log), job
    assert {"report", "estimate_natural", "epsilon_vs_step", "deep_bounds", "deep_figure", "split",
            "acquire", "train_shard", "calibrate_natural"} <= {job.rule for job in jobs}


def test_paper_preset_lists_the_deep_network_audits(tmp_path):
    """presets/paper.yaml with gpu.yaml: WRN-16-4 on CIFAR-10, 2 cases x 2 games x 5 audits x 4
    kinds (one kind per training, as Table 2) and the gap case's one full-batch training, one
    canary set, one pretraining, one figure (a dry run of the whole workflow); deep.trainings:
    together trains every kind together, and white-box-apart the input kinds in one training and
    the gradient canaries in another."""
    import re

    out = paper_dry_run()
    counts = dict(re.findall(r"^(deep_\w+)\s+(\d+)$", out, flags=re.M))
    assert counts == {"deep_canaries": "1", "deep_pretrain": "1", "deep_audit": str(2 * 2 * 5 * 4 + 1),
                      "deep_bounds": str(2 * 2 * 5 * 4 + 1), "deep_figure": "1"}
    assert "results/deep/audits/gap_substitute_gradient_0.npz" in out   # the gap case's one training
    for case in ("scratch", "finetune"):
        for game in ("membership", "substitute"):
            for kind in ("random", "mislabeled", "metagradient", "gradient"):
                assert f"results/deep/audits/{case}_{game}_{kind}_4.npz" in out
    assert "data/raw/cifar10/cifar-10-python.tar.gz" in out
    together = Path(tmp_path) / "together.yaml"
    together.write_text("deep:\n  trainings: together\n")
    out = paper_dry_run(str(together))
    counts = dict(re.findall(r"^(deep_\w+)\s+(\d+)$", out, flags=re.M))
    assert counts["deep_audit"] == str(2 * 2 * 5 + 1)
    assert "results/deep/audits/scratch_membership_all_4.npz" in out
    apart = Path(tmp_path) / "apart.yaml"   # another path: paper_dry_run is cached by its arguments
    apart.write_text("deep:\n  trainings: white-box-apart\n")
    out = paper_dry_run(str(apart))
    counts = dict(re.findall(r"^(deep_\w+)\s+(\d+)$", out, flags=re.M))
    assert counts["deep_audit"] == str(2 * 2 * 5 * 2 + 1)
    for group in ("inputs", "gradient"):
        assert f"results/deep/audits/finetune_substitute_{group}_4.npz" in out


def test_the_paper_presets_crafting_job_asks_for_its_unroll(repo_root):
    """The paper preset's deep_canaries keeps ResNet-9's whole unroll (width 64, 40 inner steps of
    128 CIFAR-10 images: about 52 GB by the proxy's measured cost): on the CPU its request holds
    it (it was a fixed 3,000 MB and 30 minutes) and its time limit the metasteps at the measured
    rate; on GPUs (presets/gpu.yaml) the job asks for a GPU, whose memory holds the unroll, and
    for the metasteps' time at the assumed GPU rate."""
    import re

    from snakemake.utils import update_config

    from subaudit.job_requests import UNMEASURED_GPU_MACS_PER_S
    from subaudit.scenarios.canary_optimisation import PROXY_NETWORKS
    from subaudit.pipeline.costs import canaries_job_resources

    block = paper_dry_run().split("rule deep_canaries:", 1)[1].split("\nrule ", 1)[0]
    asked = dict(re.findall(r"\b(mem_mb|runtime|gpu)=(\d+)", block))
    params = load_params(repo_root / "params.yaml")
    update_config(params, yaml.safe_load((repo_root / "presets/paper.yaml").read_text()))
    meta = params["deep"]["metagradient"]
    net = PROXY_NETWORKS[meta["network"]]
    images = meta["steps"] * meta["batch"]               # kept by one metastep's unroll
    unroll_mb = images * net.activations((3, 32, 32), meta["width"]) * net.unroll_bytes / 2**20
    macs = meta["metasteps"] * images * net.macs((3, 32, 32), meta["width"])
    assert asked["gpu"] == "1" and int(asked["runtime"]) * 60 >= macs / UNMEASURED_GPU_MACS_PER_S
    cpu = canaries_job_resources(params["deep"], (32, 32, 3), "cpu")
    assert unroll_mb > 40_000 and cpu["mem_mb"] >= unroll_mb
    assert cpu["runtime"] * 60 >= macs / net.macs_per_second


def test_presets_that_select_plan_nothing_of_what_they_leave_out(tmp_path):
    """The selection lists replace, where mappings merge key by key: presets/table2.yaml plans the
    2 cases x 1 game x 5 repeats x 3 input kinds of Table 2 and no job of the gap case, the
    substitute game or the gradient kind; presets/table2-slice.yaml one case, its four repeats'
    trainings of the three kinds together and no pretraining (only finetune needs one); a preset
    leaving an experiment out plans none of its jobs."""
    import re
    import subprocess
    import sys

    def deep_jobs(out: str) -> dict[str, str]:
        return dict(re.findall(r"^(deep_\w+)\s+(\d+)$", out, flags=re.M))

    deep_figure = ("--", "results/figures/deep-one-run.png")   # the deep phase's jobs only
    table2 = paper_dry_run("presets/table2.yaml", *deep_figure)
    assert deep_jobs(table2) == {"deep_canaries": "1", "deep_pretrain": "1", "deep_audit": str(2 * 5 * 3),
                                 "deep_bounds": str(2 * 5 * 3), "deep_figure": "1"}
    audits = set(re.findall(r"results/deep/audits/(\w+?)_\d+\.npz", table2))
    assert audits == {f"{case}_membership_{kind}" for case in ("scratch", "finetune")
                      for kind in ("random", "mislabeled", "metagradient")}
    assert "gap" not in " ".join(re.findall(r"case=\w+", table2))
    sliced = paper_dry_run("presets/table2-slice.yaml", *deep_figure)
    assert deep_jobs(sliced) == {"deep_canaries": "1", "deep_audit": "4", "deep_bounds": "4", "deep_figure": "1"}
    assert set(re.findall(r"results/deep/audits/(\w+)\.npz", sliced)) == {f"scratch_membership_all_{r}"
                                                                          for r in range(4)}
    no_text = tmp_path / "no-text.yaml"         # over the default: its three experiments
    no_text.write_text("natural:\n  run_experiments: [image, tabular]\n")
    proc = subprocess.run([Path(sys.executable).parent / "snakemake", "-n", "--forceall", "--configfile", no_text],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "exp=text" not in proc.stdout and "data/raw/rotten-tomatoes" not in proc.stdout
    assert "exp=tabular" in proc.stdout and "exp=image" in proc.stdout


def dag_shape(out: str) -> dict[str, set[str]]:
    """What a dry run's DAG is made of, sizes aside: its rules, each experiment's scenarios, the
    deep phase's (case, game, training) triples, the sources it reads and the figures."""
    import re

    return {"rules": set(re.findall(r"^(?:local)?rule (\w+):", out, flags=re.M)),
            "scenarios": set(re.findall(r"results/natural/(\w+)/scores/(S\d)_", out)),
            "deep": set(re.findall(r"results/deep/audits/(\w+?)_\d+\.npz", out)),
            "sources": set(re.findall(r"data/raw/([\w.-]+)/", out)),
            "figures": set(re.findall(r"results/figures/([\w-]+)\.png", out))}


def test_the_rehearsal_is_the_paper_presets_dag_shrunk(tmp_path):
    """presets/rehearsal.yaml over the paper preset plans every rule, experiment, scenario, deep
    case, game and training (one kind each), figure and the download path (acquire) the paper
    preset plans, with stand-ins for the three sources it cannot fetch; the deep phase's networks
    (WRN-16-4, the ResNet-9 proxy), augmentation views and physical batches stay the paper's
    kinds; fewer jobs."""
    import re

    from snakemake.utils import update_config

    from subaudit.pipeline.config import load_params, read_yaml

    paper, rehearsal = paper_dry_run(), paper_dry_run("presets/rehearsal.yaml")
    full, shrunk = dag_shape(paper), dag_shape(rehearsal)
    assert full["rules"] == shrunk["rules"] and "acquire" in shrunk["rules"]
    for part in ("scenarios", "deep", "figures"):
        assert full[part] == shrunk[part], part
    assert full["sources"] == {"cifar10", "sst2", "purchase100"}
    assert shrunk["sources"] == {"cifar10-shaped", "rotten-tomatoes", "letter"}
    jobs = [int(re.search(r"^total\s+(\d+)$", out, flags=re.M).group(1)) for out in (paper, rehearsal)]
    assert jobs[1] < jobs[0] / 5
    root = Path(__file__).resolve().parents[2]
    params = load_params(root / "params.yaml")
    for preset in ("paper", "rehearsal"):
        update_config(params, read_yaml(root / f"presets/{preset}.yaml"))
    deep = params["deep"]
    assert (deep["network"], deep["metagradient"]["network"]) == ("wrn-16-4", "resnet-9")
    assert deep["trainings"] == "each" and deep["metagradient"]["base_from"] == "train"
    views = [c["augmentations"] for c in deep["cases"].values() if "augmentations" in c]
    assert max(views) > 1 and deep["physical_batch"] < min(c["batch"] for c in deep["cases"].values())


def test_the_workflow_drops_snakemakes_default_job_rate_limit(tmp_path):
    """The Snakefile removes Snakemake's default 100-per-1-s job rate limit, whose timers pile
    up one per finished job (after a run of 40 jobs the scheduler's process has no timer
    thread), and keeps a limit asked for explicitly."""
    import subprocess
    import sys

    from conftest import ROOT

    head = (ROOT / "Snakefile").read_text().split("include:")[0].replace('configfile: "params.yaml"', "")
    head = head.replace("    validate_params(config", "    pass  # validate_params(config")
    head = head.replace("config.update(selected(config))", "pass  # no params here")
    (tmp_path / "Snakefile").write_text(head + """
import threading
onsuccess:
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]
    print("TIMERS", len(timers), workflow.scheduler.job_rate_limiter is None)
rule all:
    input: expand("out/{i}.txt", i=range(40))
rule one:
    output: "out/{i}.txt"
    shell: "touch {output}"
""")
    bin_dir = Path(sys.executable).parent
    for extra, want in (([], "TIMERS 0 True"), (["--max-jobs-per-timespan", "50/1s"], " False")):
        proc = subprocess.run([bin_dir / "snakemake", "--cores", "2", "--forceall", *extra], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert want in proc.stdout + proc.stderr, (extra, (proc.stdout + proc.stderr)[-1500:])


def test_the_workflows_imports_leave_scipy_pandas_and_torch_for_the_jobs(repo_root):
    """What the Snakefile and its rule files import while Snakemake parses (every run, dry run
    and cluster job does) loads neither SciPy, pandas, prv-accountant nor torch: the jobs that
    compute import them (the accounting package's names resolve on first use: tests/accounting/
    test_init.py)."""
    import re

    sources = [repo_root / "Snakefile", *sorted((repo_root / "workflow" / "rules").glob("*.smk"))]
    lines = sorted({m.group(1) for p in sources
                    for m in re.finditer(r"^\s*((?:from subaudit\S* import .+)|(?:import subaudit\S*.*))$",
                                         p.read_text(), re.M)})
    assert any("ESTIMATORS" in line for line in lines) and any("SOURCES" in line for line in lines)
    assert loaded_modules("\n".join(lines), ("scipy", "pandas", "prv_accountant", "torch"), cwd=repo_root) == []


def test_checking_the_shipped_configurations_loads_no_scipy_distributions(repo_root):
    """Every Snakemake run checks its configuration first: for the shipped parameters and presets
    the deep phase's canary counts are read from a table (subaudit.estimation.procedures), not
    computed through SciPy's distributions, whose import was 0.7 s of each run's start."""
    probe = ("import sys, yaml\n"
             "from snakemake.utils import update_config\n"
             "from subaudit.pipeline.config import load_params, validate_params\n"
             "for preset in [None, *sys.argv[1:]]:\n"
             "    p = load_params('params.yaml')\n"
             "    if preset: update_config(p, yaml.safe_load(open(preset)))\n"
             "    validate_params(p)")
    presets = [str(p.relative_to(repo_root)) for p in sorted((repo_root / "presets").glob("*.yaml"))]
    assert loaded_modules(probe, ("scipy.stats", "scipy.optimize"), *presets, cwd=repo_root) == []
