# Phase: S1 worst-case dataset canary audit (simulated DP-SGD gradient sums).  A job covers
# one sampling rate: its simulations take seconds each, less than a job's start-up.


# Estimating takes seconds: run where the workflow was started.
localrules:
    estimate_s1,


rule simulate_s1:
    """Scores of runs_per_world runs with D and as many with D', for every target eps_S and
    repeat at one q, each at its calibrated sigma."""
    input:
        s1_files("calibration"),
    output:
        s1_files("scores"),
    params:
        steps=S1["steps"],
        runs_per_world=S1["runs_per_world"],
        adjacency=S1["adjacency"],
        checkpoints=S1_CHECKPOINTS,
        seeds=lambda wc: [S.seed(config["seed"], "s1", v) for v in s1_values(wc.q)],
    log:
        "logs/s1/simulate_q{q}.log",
    benchmark:
        "logs/benchmarks/s1/simulate_q{q}.tsv"
    resources:
        **requests(s1_request),
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/simulate_s1.py"


rule estimate_s1:
    """Empirical lower bounds on epsilon at every recorded step, per estimator, for the S1
    score files of one q."""
    input:
        s1_files("scores"),
    output:
        s1_files("estimates"),
    params:
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
    log:
        "logs/s1/estimate_q{q}.log",
    benchmark:
        "logs/benchmarks/s1/estimate_q{q}.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/estimate_s1.py"
