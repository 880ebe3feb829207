# Phase: S1 worst-case dataset canary audit (simulated DP-SGD gradient sums) and estimation.


rule simulate_s1:
    """Scores of runs_per_world runs with D and as many with D' at the calibrated sigma."""
    input:
        calibration="results/accounting/s1/q{q}_eps{eps}.json",
    output:
        "results/s1/scores/q{q}_eps{eps}_rep{rep}.npz",
    params:
        steps=S1["steps"],
        runs_per_world=S1["runs_per_world"],
        adjacency=S1["adjacency"],
        checkpoints=S1_CHECKPOINTS,
        seed=lambda wc: derive_seed(config["seed"], "s1", wc.q, wc.eps, int(wc.rep)),
    log:
        "logs/s1/simulate/q{q}_eps{eps}_rep{rep}.log",
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/simulate_s1.py"


rule estimate_s1:
    """Empirical lower bounds on epsilon from one repeat's scores, per estimator."""
    input:
        "results/s1/scores/q{q}_eps{eps}_rep{rep}.npz",
    output:
        "results/s1/estimates/q{q}_eps{eps}_rep{rep}.json",
    params:
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
        seed=lambda wc: derive_seed(config["seed"], "s1-split", wc.q, wc.eps, int(wc.rep)),
    log:
        "logs/s1/estimate/q{q}_eps{eps}_rep{rep}.log",
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/estimate_s1.py"
