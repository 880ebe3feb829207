# Phase: S1 worst-case dataset canary audit (simulated DP-SGD gradient sums); the one estimate
# rule, for S1 and natural-data audits alike.


# Estimating epsilon from a score file takes seconds: run where the workflow was started.
localrules:
    estimate,


rule simulate_s1:
    """Scores of runs_per_world runs with D and as many with D' at the calibrated sigma."""
    input:
        calibration=lambda wc: "results/accounting/s1/q{q}_eps{eps}.json".format(
            q=fmt(values(wc)["q"]), eps=fmt(values(wc)["target_epsilon"])),
    output:
        "results/s1/scores/{key}.npz",
    params:
        steps=S1["steps"],
        runs_per_world=S1["runs_per_world"],
        adjacency=S1["adjacency"],
        checkpoints=S1_CHECKPOINTS,
        seed=seed("s1"),
    log:
        "logs/s1/simulate/{key}.log",
    benchmark:
        "logs/benchmarks/s1/simulate_{key}.tsv"
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/simulate_s1.py"


rule estimate:
    """Empirical lower bounds on epsilon at every recorded step, per estimator."""
    input:
        "results/{audit}/scores/{name}.npz",
    output:
        "results/{audit}/estimates/{name}.json",
    params:
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
        seed=estimate_seed,
    log:
        "logs/{audit}/estimate_{name}.log",
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/estimate.py"
