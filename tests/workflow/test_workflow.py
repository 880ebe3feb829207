"""Integration: the real Snakemake workflow on a tiny config.

Reads the session's one run of the whole DAG (``tiny_run``, conftest), then checks that a
second run does nothing and, on private copies of it (``tiny_copy``), that changing one value
in params.yaml reruns exactly the jobs that depend on it, and that a bad value stops the
workflow before any job runs, naming the key.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import (base_ablations, job_counts, jobs_over_requests, lean, setting_path, snakemake, tiny,
                      workflow_copy, write_params)
from subaudit.pipeline.config import ConfigError, validate_params
from subaudit.scenarios.reconstruction import OUTCOMES

pytestmark = pytest.mark.slow


@pytest.fixture
def workdir(tiny_run) -> Path:
    """The session's tiny run, read only."""
    return tiny_run


def test_default_targets_are_built(workdir):
    for name in ("fig2", "figA5", "fig3", "figA6", "fig4", "figA1", "one-run", "fig5", "figA2",
                 "figA3", "figA4", "reconstruction"):
        for ext in ("png", "pdf", "csv"):
            path = workdir / "results" / "figures" / f"{name}.{ext}"
            assert path.is_file() and path.stat().st_size > 0, path
    fig2 = pd.read_csv(workdir / "results/figures/fig2.csv")
    assert set(fig2["q"]) == {1.0, 0.25}
    assert set(fig2["target_epsilon"]) == {2.0, 4.0}
    audit = fig2[fig2["estimator"].notna() & (fig2["estimator"] != "")]
    assert set(audit["estimator"]) == {"auc", "paper"}
    assert (audit["n_repeats"] == 2).all()
    acc = fig2[fig2["series"] == "eps_S (accounting)"]
    # sigma was calibrated so that the substitute accountant hits the target
    assert (abs(acc["epsilon"] - acc["target_epsilon"]) <= 0.01 * acc["target_epsilon"]).all()
    a5 = pd.read_csv(workdir / "results/figures/figA5.csv")
    assert len(a5) == 4
    assert (a5["ratio"] > 1.0).all()


def test_s6_s7_and_the_reconstruction_are_built(workdir):
    """S6 and S7 sit beside S2-S5 in every experiment's figure (not in the ablations); S7's
    canary info reports the alignment, S6's its crafting at the calibrated noise; the
    reconstruction counts every trap unit once."""
    for name in ("fig3", "figA6", "fig4"):
        table = pd.read_csv(workdir / f"results/figures/{name}.csv")
        assert set(table["scenario"].dropna()) == {"S2", "S3", "S4", "S5", "S6", "S7"}
    ablated = set(pd.read_csv(workdir / "results/figures/figA2.csv")["scenario"].dropna())
    assert not ablated & {"S6", "S7"}
    info = json.loads((workdir / "results/natural/tabular/canaries/S7_q0.5_C5_T4_k2_lr0.01.json").read_text())
    assert info["scenario"] == "S7" and info["alignment_start"] > 0.9 and len(info["alignment_per_step"]) == 5
    s6 = json.loads((workdir / "results/natural/tabular/canaries/S6_q0.5_C5_T4_k2_lr0.01_eps4.json").read_text())
    assert s6["scenario"] == "S6" and s6["domain"] == "one-hot" and len(s6["objective_per_metastep"]) == 2
    assert s6["kept"] in ("optimised", "start") and s6["label_prime"] != s6["label"]
    rec = pd.read_csv(workdir / "results/figures/reconstruction.csv")
    fired = rec[rec["outcome"] != OUTCOMES[1]]          # one image, two or more, none: every unit once
    assert fired.groupby("source")["units"].sum().round(6).tolist() == [16.0] * 3
    units = pd.read_csv(workdir / "results/reconstruction/reconstruction_units.csv")
    assert len(units) == 16 and set(units["status"]) <= {"single", "single, not recovered", "mixed", "never"}
    assert "reconstruction" in (workdir / "results/report.md").read_text()


def test_one_run_audits_are_built(workdir):
    table = pd.read_csv(workdir / "results/figures/one-run.csv")
    assert set(table["kind"]) == {"gradient", "label"} and set(table["q"]) == {1.0}
    one = table[table["series"].str.startswith("one-run")]
    assert set(one["method"]) == {"steinke", "mahloujifar"} and (one["trainings"] == 1).all()
    assert (one["n_repeats"] == 2).all() and (one["epsilon"] >= 0).all()
    r_run = table[table["series"].str.startswith("R-run")]
    assert set(r_run["series"]) == {"R-run audit (S2, auc estimator)", "R-run audit (S4, auc estimator)"}
    assert (r_run["trainings"] == 32).all()
    ceiling = table[table["series"] == "final-iterate ceiling (substitute)"]
    acc = table[table["series"] == "eps_S (accounting)"]
    assert len(ceiling) == 2 and (ceiling["epsilon"].to_numpy() <= acc["epsilon"].to_numpy() + 1e-9).all()
    scores = np.load(next((workdir / "results/one_run/image/scores").glob("gradient_*.npz")))
    assert scores["scores"].shape == (2, 8) and scores["bits"].shape == (2, 8)


def test_step_wise_scores_are_recorded(workdir):
    data = np.load(workdir / "results/s1/scores/q1_eps2_rep0.npz")
    assert list(data["steps"]) == [20, 40]
    assert data["scores"].shape == (2, 1000)
    assert int(data["bits"].sum()) == 500 and list(data["runs"]) == list(range(1000))
    est = json.loads((workdir / "results/s1/estimates/q1_eps2_rep0.json").read_text())["estimates"]
    assert [(r["step"], r["estimator"]) for r in est] == [
        (20, "auc"), (20, "paper"), (40, "auc"), (40, "paper")]
    assert all(r["epsilon"] >= 0 and r["q"] == 1.0 and r["repeat"] == 0
               and r["target_epsilon"] == 2.0 for r in est)


def test_natural_audits_are_built(workdir):
    params = tiny()
    fig3 = pd.read_csv(workdir / "results/figures/fig3.csv")
    audits = fig3[fig3["scenario"].notna()]
    assert set(audits["scenario"]) == {"S2", "S3", "S4", "S5", "S6", "S7"}
    assert set(audits["estimator"]) == {"auc", "paper"}
    assert set(fig3["step"]) == {2, 4}
    acc = fig3[fig3["series"] == "eps_S (accounting)"]
    assert (abs(acc[acc.step == 4]["epsilon"] - 4.0) <= 0.04).all()
    merged = np.load(workdir / setting_path("scores", params, "image", "S3"))
    assert list(merged["runs"]) == list(range(32)) and int(merged["bits"].sum()) == 16
    assert merged["scores"].shape == (2, 32)
    assert json.loads(str(merged["setting"]))["clip"] == 2.0
    for scenario in ("S3", "S4", "S5"):
        info = json.loads((workdir / setting_path("canary_info", params, "image", scenario))
                          .read_text())
        assert {"cosine", "norm_z", "norm_z_prime"} <= set(info)
    est = json.loads((workdir / setting_path("estimates", params, "tabular", "S4", q=0.5))
                     .read_text())["estimates"]
    assert {(r["experiment"], r["scenario"], r["q"], r["lr"], r["runs"]) for r in est} == {
        ("tabular", "S4", 0.5, 0.01, 32)}
    a1 = pd.read_csv(workdir / "results/figures/figA1.csv")
    assert set(a1["scenario"]) == {"S2", "S3"} and (a1["n_runs"] == 4).all()
    feats = np.load(workdir / "data/features/text.npz")
    assert feats["train_x"].shape == (20, 384)


def test_deep_network_audits_are_built(workdir):
    """The deep-network phase: every case, game, kind, score and procedure, bounds no larger
    than what the canaries can show, and its Table 2 and claim 8 in the report."""
    deep = tiny()["deep"]
    table = pd.read_csv(workdir / "results/figures/deep-one-run.csv")
    assert set(table["case"]) == set(deep["cases"]) and set(table["game"]) == set(deep["games"])
    assert set(table["kind"]) == set(deep["kinds"]) and set(table["procedure"]) == set(deep["procedures"])
    assert set(table["score"]) == {*deep["scores"], *deep["gradient_scores"]}
    assert (table["epsilon"] <= table["perfect"]).all() and (table["trainings"] == 1).all()
    assert (table["reference"] == table["eps_substitute"].where(table["game"] == "substitute",
                                                                table["eps_add_remove"])).all()
    assert table[table["kind"] == "gradient"]["ceiling"].notna().all()
    report = (workdir / "results/report.md").read_text()
    assert "Claims beyond the paper" in report and "optimised canaries give higher one-run bounds" in report
    assert "membership game: one-run lower bounds, average and median over audits" in report
    assert "gradient (residual)" in report   # each white-box score its own row, never pooled
    metrics = json.loads((workdir / "results/report.json").read_text())
    from subaudit.reporting.claims import Evidence, judge_all

    (verdict,) = [v for v in judge_all(Evidence({"deep-one-run": table}, "auc", {})) if v.claim == 8]
    assert metrics["claims"]["8"]["verdict"] == verdict.status  # the report judges from the CSV
    gap = deep["cases"]["gap"]   # one training of its own game and kind
    assert len(list((workdir / "results/deep/audits").glob("*.npz"))) == 2 * 2 * deep["repeats"] + gap["repeats"]


def test_the_report_pins_the_figures_it_judged_and_the_run_compares_equal_with_itself(workdir):
    """report.json names every figure CSV by sha256 (so dvc.lock's report pins them, and the
    reference kept in git); `subaudit compare` of the run against its own results agrees."""
    figures = workdir / "results/figures"
    pinned = json.loads((workdir / "results/report.json").read_text())["figure_csvs"]
    assert pinned == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(figures.glob("*.csv"))}
    proc = subprocess.run([Path(sys.executable).parent / "subaudit", "compare", str(workdir),
                           str(workdir / "results")], capture_output=True, text=True)
    assert proc.returncode == 0 and "agrees" in proc.stdout, proc.stdout + proc.stderr


def test_every_artifact_verifies_and_is_readable_by_others(workdir):
    """`subaudit verify data results` finds nothing damaged after a fresh run (the splits
    too: every artifact goes through the one writer), and no file is private (0600)."""
    proc = subprocess.run([Path(sys.executable).parent / "subaudit", "verify", "data", "results",
                           "--json"], cwd=workdir, capture_output=True, text=True)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["damaged"] == [], out
    assert out["checked"] > 100
    for path in [*(workdir / "data").rglob("*.npz"), *(workdir / "results").rglob("*.*")]:
        assert path.stat().st_mode & 0o044 == 0o044, path


def test_second_run_does_nothing(workdir):
    assert job_counts(workdir) == {}


def test_every_job_stays_within_what_it_asked_the_cluster_for(workdir):
    """Every job of the tiny run: its peak memory and wall time (its log's line from the warm
    worker that ran it, else its benchmark file) within the mem_mb and runtime it requests
    (what a SLURM job would be killed for exceeding), each rule requesting both; every job
    measured one way or the other."""
    proc = snakemake(workdir, "--dry-run", "--forceall")
    assert proc.returncode == 0, proc.stderr[-3000:]
    checked, over = jobs_over_requests(workdir, proc.stdout)
    assert checked > 100 and not over, over


def test_every_job_computed_under_the_machine_independent_numerics(workdir):
    """The workflow sets subaudit.devices.NUMERICS_ENV before any job: every job's log records it
    (in the warm worker and in its own process alike), whatever this shell had set."""
    from subaudit.devices import NUMERICS_ENV

    want = "numerics: " + " ".join(f"{k}={v}" for k, v in NUMERICS_ENV.items())
    logs = [p for p in (workdir / "logs").rglob("*.log") if p.name != "warm-worker.log"]
    started = [p for p in logs if "numerics: " in p.read_text()]
    assert len(started) > 100 and all(want in p.read_text() for p in started), \
        [p for p in started if want not in p.read_text()][:5]


def test_jobs_in_the_warm_worker_compute_what_their_own_processes_do(tiny_copy):
    """The session's run went through the warm worker (subaudit.pipeline.warm): every job but
    those with more threads ran there.  A training shard, its estimates, a deep-network audit,
    a crafted canary and a figure rerun each in its own process give the same bytes."""
    import os

    from conftest import digests

    log = (tiny_copy / "logs" / "warm-worker.log").read_text()
    ran = int(log.rsplit("stopped: ", 1)[1].split(" jobs")[0])
    refused = [line for line in log.splitlines() if " refused " in line]
    assert ran >= 100 and all("differs in GOTO_NUM_THREADS" in line for line in refused), log[-2000:]
    targets = [next(iter(sorted((tiny_copy / "results" / pattern[0]).glob(pattern[1])))).relative_to(tiny_copy)
               for pattern in (("natural", "image/shards/S2_*/runs*.npz"), ("natural", "image/estimates/S2_*.json"),
                               ("deep", "audits/scratch_*.npz"), ("natural", "image/canaries/S3_*.npz"),
                               ("figures", "fig2.csv"))]
    compared = [*map(str, targets), "results/figures/fig2.png"]
    before = digests(tiny_copy, *compared)
    assert len(before) == len(compared)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--force", *map(str, targets)],
                          cwd=tiny_copy, capture_output=True, text=True,
                          env={**os.environ, "SUBAUDIT_WARM_WORKER": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{len(targets)} of {len(targets)} steps (100%) done" in proc.stderr
    assert digests(tiny_copy, *compared) == before


def test_param_change_reruns_only_dependent_jobs(tiny_copy):
    workdir = tiny_copy
    params = tiny()
    try:
        params["s1"]["runs_per_world"] = 600
        write_params(workdir, params)
        assert job_counts(workdir) == {"all": 1, "simulate_s1": 2, "estimate_s1": 2,
                                       "epsilon_vs_target": 1, "report": 1}

        params["s1"]["runs_per_world"] = 500
        params["alpha"] = 0.1
        write_params(workdir, params)
        # S1 estimates (one job per q), 18 natural ones (3 experiments x 6 scenarios) and 6 of
        # the ablations (one new value of each of C, T and lr x 2 scenarios), the one-run
        # audits (one job per canary kind), the deep-network bounds (from the saved scores: no
        # training), the figures drawn from them and the report
        assert job_counts(workdir) == {"all": 1, "estimate_s1": 2, "estimate_natural": 24,
                                       "epsilon_vs_target": 1, "epsilon_vs_step": 3,
                                       "one_run": 2, "one_run_figure": 1, "ablation_figure": 3,
                                       "runs_figure": 1, "deep_bounds": 5, "deep_figure": 1, "report": 1}

        params["alpha"] = 0.05
        params["ratio_grid"]["noise_multipliers"] = [3.0, 7.0]
        write_params(workdir, params)
        assert job_counts(workdir) == {"all": 1, "ratio_grid_row": 2, "ratio_grid": 1, "report": 1}

        params["ratio_grid"]["noise_multipliers"] = [3.0, 6.0]
        params["s1"]["sampling_rates"] = [1.0, 0.5]
        write_params(workdir, params)
        # only the new q's settings are computed (one job each); q = 1 is untouched
        assert job_counts(workdir) == {"all": 1, "calibrate_s1": 1, "simulate_s1": 1,
                                       "estimate_s1": 1, "epsilon_vs_target": 1, "report": 1}

        params["s1"]["sampling_rates"] = [1.0, 0.25]
        params["natural"]["experiments"]["image"]["sampling_rates"] = [1.0, 0.5]
        write_params(workdir, params)
        # one new q: its S2, S6 and S7 canaries, 6 scenarios x 1 shard (S3-S6 their runs with
        # z', and one shard of the runs with z they share), merged estimates and the figure;
        # features, reference model and S3-S5 canaries are untouched, and the calibration at
        # (q 0.5, T 4, k 2, eps 4) is the tabular experiment's, already there; Fig 5 takes the
        # new q's audits, the ablations (at q = 1) are untouched
        assert job_counts(workdir) == {"all": 1, "craft": 3, "train_shard": 6, "train_target": 1,
                                       "estimate_natural": 6, "epsilon_vs_step": 1,
                                       "one_run": 2, "one_run_figure": 1, "runs_figure": 1,
                                       "report": 1}

        params["natural"]["experiments"]["image"]["sampling_rates"] = [1.0]
        params["natural"]["target_epsilon"] = 5.0
        write_params(workdir, params)
        # a new noise level retrains every shard but recomputes neither features nor the
        # canaries crafted without noise; S6, crafted against the noise, is crafted again
        counts = job_counts(workdir)
        assert "features" not in counts and counts["craft"] == 3       # S6 of each experiment
        # (one shard x 6 scenarios x 3 experiments, and x 2 scenarios x 3 ablation values of C,
        # T and lr); the shared runs with z of S3-S6 at the 3 base settings (at an ablation
        # value S3 is the only input canary: it trains both of its worlds in its shard)
        assert "reference" not in counts and counts["train_shard"] == 6 * 3 + 2 * 3
        assert counts["train_target"] == 3
    finally:
        write_params(workdir, tiny())
    assert job_counts(workdir) == {}


def test_variations_reuse_what_they_do_not_change(tiny_copy):
    workdir = tiny_copy
    params = tiny()
    try:
        params["natural"]["variations"] = [
            {"experiments": ["tabular"], "scenarios": ["S2", "S3"], "clip": [1.0]}]
        write_params(workdir, params)
        # another C: the S2 canary (crafted with C) and the shards; the reference model, the
        # S3 canary and the calibration do not depend on C; no figure changes
        assert job_counts(workdir) == {"all": 1, "craft": 1, "train_shard": 2,
                                       "estimate_natural": 2}

        params["natural"]["variations"] = [
            {"experiments": ["tabular"], "scenarios": ["S2"], "runs": [64]},
            {"experiments": ["tabular"], "scenarios": ["S2"], "runs": [32]}]   # = base: no-op
        write_params(workdir, params)
        # R = 64 keeps the shard of runs 0-31 and trains the next one
        assert job_counts(workdir) == {"all": 1, "train_shard": 1, "estimate_natural": 1}
        proc = snakemake(workdir)
        assert proc.returncode == 0, proc.stderr[-3000:]
        big = np.load(workdir / setting_path("scores", params, "tabular", "S2", runs=64))
        small = np.load(workdir / setting_path("scores", params, "tabular", "S2"))
        assert np.array_equal(big["scores"][:, :32], small["scores"])
    finally:
        write_params(workdir, tiny())
    assert job_counts(workdir) == {}


def test_reproduction_switches_run_the_papers_code_choices(tmp_path):
    """presets/paper.yaml's switches on the tiny image experiment at two q, with the scenarios
    they are about (S2, S3, S5) and nothing else: a minibatch reference per q (so the S3 and S5
    canaries are per q too), log-odds S3/S5 scores, the gradient-rms S2 coordinate and a small
    S5 pool, each in the artifacts they change (the report's table of them is the session's
    run's: test_the_report_names_each_reproduction_switch)."""
    wd = workflow_copy(tmp_path)
    params = lean(tiny())
    params["reconstruction"]["experiment"] = None
    nat = params["natural"]
    nat.update(reference="per-q", input_score="log-odds", s2_coordinate="gradient-rms",
               scenarios=["S2", "S3", "S5"])
    nat["experiments"] = {"image": {**nat["experiments"]["image"], "s5_pool": 3,
                                    "sampling_rates": [1.0, 0.5]}}
    params["ablations"]["scenarios"] = ["S2", "S3", "S5"]
    base_ablations(params, "image")
    write_params(wd, params)
    counts = job_counts(wd)
    # a reference at each q; S2, S3 and S5 crafted per q (S3 and S5 on that q's reference)
    assert counts["reference"] == 2 and counts["craft"] == 3 * 2
    reference = "results/natural/image/reference/q0.5_T4_k2_lr0.01.json"
    s5 = "results/natural/image/canaries/S5_q0.5_T4_k2_lr0.01.json"
    s2 = "results/natural/image/canaries/S2_q1_C2_T4_lr0.01.json"
    proc = snakemake(wd, reference, s5, s2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((wd / reference).read_text())["sampling_rate"] == 0.5
    s5 = json.loads((wd / s5).read_text())
    assert s5["score"] == "log-odds" and s5["pool"] == 3 and s5["aux_index"] < 3
    assert json.loads((wd / s2).read_text())["statistic"] == "gradient-rms"


def test_the_report_names_each_reproduction_switch(workdir):
    """The report's table of the switches is the run's configuration (the tiny run: the
    paper's text everywhere); ``switch_settings`` names the code's choices
    (tests/pipeline/test_settings.py)."""
    from subaudit.pipeline.settings import switch_settings

    report = (workdir / "results/report.md").read_text()
    table = switch_settings(tiny()["natural"])
    assert len(table) == 3 + 2 * 3
    for what, value in table.items():
        assert f"| {what} | {value} |" in report, what
    assert "| S3/S5 score (natural.input_score) | logit-difference (the paper's text) |" in report


def test_report_verdicts_follow_the_numbers(tiny_copy):
    workdir = tiny_copy
    """The report is built from the figures' CSVs: the default tiny run judges claim 2 from
    Fig 2's accountant rows; halving eps_S by group privacy there makes it refuted."""
    verdicts = json.loads((workdir / "results/report.json").read_text())["claims"]
    assert set(verdicts) == {str(i) for i in range(1, 10)}
    assert verdicts["2"]["verdict"] == "supported" and verdicts["2"]["code"] == 1
    fig2 = workdir / "results/figures/fig2.csv"
    original = fig2.read_bytes()
    try:
        table = pd.read_csv(fig2)
        group = table["series"] == "eps_S (group privacy)"
        table.loc[group, "epsilon"] = table.loc[group, "epsilon"] / 2
        table.to_csv(fig2, index=False)
        proc = snakemake(workdir, "results/report.json")
        assert proc.returncode == 0, proc.stderr[-3000:]
        changed = json.loads((workdir / "results/report.json").read_text())["claims"]["2"]
        assert changed["verdict"] == "refuted" and changed["code"] == -1
        assert "REFUTED" in (workdir / "results/report.html").read_text()
    finally:
        fig2.write_bytes(original)
    proc = snakemake(workdir, "results/report.json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((workdir / "results/report.json").read_text())["claims"]["2"]["code"] == 1


@pytest.mark.parametrize(
    ("section", "key", "value", "expected"),
    [
        ("s1", "sampling_rates", [1.0, 1.5], "s1.sampling_rates[1] = 1.5"),
        ("ratio_grid", "noise_multipliers", [-2.0], "ratio_grid.noise_multipliers[0] = -2.0"),
        ("s1", "adjacency", "swap", "s1.adjacency = 'swap'"),
        (None, "scenario", "S9", "unknown key scenario"),
        (None, "estimators", ["auc", "bogus"],
         "estimators[1] = 'bogus' is invalid; allowed: one of auc, paper"),
        ("natural", "scenarios", ["S2", "S9"],
         "natural.scenarios[1] = 'S9' is invalid; allowed: one of S2, S3, S4, S5"),
        ("natural", "runs", 31, "natural.runs = 31"),
        ("natural", "variations", [{"experiments": ["audio"], "clip": [1.0]}],
         "natural.variations[0].experiments[0] = 'audio' is invalid; allowed: one of image"),
        ("natural", "variations", [{"scenarios": ["S9"]}],
         "natural.variations[0].scenarios[0] = 'S9' is invalid"),
        ("natural", "variations", [{"every": [8]}], "natural.variations[0].every = 8"),
        ("natural", "variations", [{"clip": [0.0]}], "natural.variations[0].clip[0] = 0.0"),
        ("one_run", "experiment", "audio",
         "one_run.experiment = 'audio' is invalid; allowed: one of image, text, tabular"),
        ("one_run", "kinds", ["gradient", "pixel"],
         "one_run.kinds[1] = 'pixel' is invalid; allowed: one of gradient, label"),
        ("one_run", "methods", ["steinke", "lira"],
         "one_run.methods[1] = 'lira' is invalid; allowed: one of steinke, mahloujifar"),
        ("one_run", "canaries", 11, "one_run.canaries = 11 is invalid; allowed: at most n_aux = 10"),
    ],
)
def test_bad_params_are_refused_naming_the_key(section, key, value, expected):
    _bad_params_fail(section, key, value, expected)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("source", "nosuch", "natural.experiments.image.source = 'nosuch' is invalid; "
                             "allowed: one of mnist-5k, rotten-tomatoes, letter"),
        ("source", "letter", "natural.experiments.image.backbone = 'efficientnet-lite0' is "
                             "invalid; allowed: one of none"),
        ("sampling_rates", [0.0], "natural.experiments.image.sampling_rates[0] = 0.0"),
        ("backbone", "resnet", "natural.experiments.image.backbone = 'resnet'"),
        ("n_train", 25, "natural.experiments.image.n_train = 25 is invalid"),
        ("weights_checksum", "ab" * 32, "natural.experiments.image.weights_checksum = '" + "ab" * 32
         + "' is invalid; allowed: only with a backbone whose weights are downloaded (vit-b16-in21k)"),
        ("weights_checksum", "ab", "natural.experiments.image.weights_checksum"),
    ],
)
def test_bad_experiment_params_are_refused_naming_the_key(key, value, expected):
    _bad_params_fail("image", key, value, expected)


def test_bad_experiment_name_is_refused():
    params = tiny()
    params["natural"]["experiments"]["my_data"] = params["natural"]["experiments"].pop("text")
    _fails(params, "natural.experiments")


def _bad_params_fail(section, key, value, expected):
    params = tiny()
    where = params["natural"]["experiments"]["image"] if section == "image" else (
        params[section] if section else params)
    where[key] = value
    _fails(params, expected)


def _fails(params, expected):
    """The Snakefile's first statement, ``validate_params``, refuses ``params`` naming the key
    (in process: Snakemake stopping on it before any job is shown once, below)."""
    with pytest.raises(ConfigError) as err:
        validate_params(copy.deepcopy(params), source="params.yaml")
    assert expected in str(err.value)


@pytest.mark.parametrize(("section", "key", "value", "expected"), [
    ("natural", "runs", 31, "natural.runs = 31"),                          # the schema
    ("one_run", "canaries", 11, "one_run.canaries = 11 is invalid; allowed: at most n_aux = 10"),
])
def test_a_bad_value_stops_the_workflow_before_any_job(tmp_path, section, key, value, expected):
    """Through Snakemake: the run stops naming the key, with no job run, nothing written."""
    params = tiny()
    params[section][key] = value
    workflow_copy(tmp_path, params)
    proc = snakemake(tmp_path)
    assert proc.returncode != 0
    assert expected in proc.stderr + proc.stdout, (proc.stderr + proc.stdout)[-2000:]
    assert not (tmp_path / "results").exists()
    assert not (tmp_path / "logs").exists()


def test_downloaded_weights_without_a_recorded_sha256_stop_their_features_job(tiny_run, tmp_path):
    """The paper's ViT-B/16 backbone, whose weights have no pinned digest, with none recorded:
    its features job stops before loading any weights, naming the key that records one."""
    import os
    import shutil

    params = tiny()
    params["natural"]["experiments"]["image"]["backbone"] = "vit-b16-in21k"
    workflow_copy(tmp_path, params)
    for part in ("data/raw", "data/splits"):                  # the split, done: one job to run
        shutil.copytree(tiny_run / part, tmp_path / part)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "data/features/image.npz"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode != 0 and "features" in proc.stderr and "rule split" not in proc.stderr
    log = (tmp_path / "logs" / "data" / "features_image.log").read_text()
    assert "vit-b16-in21k: its weights (timm/vit_base_patch16_224.augreg_in21k, file model.safetensors)" in log
    assert "set `natural.experiments.image.weights_checksum: <that sha256>`" in log
    assert not (tmp_path / "data" / "features").exists() or not any((tmp_path / "data" / "features").iterdir())
