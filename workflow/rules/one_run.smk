# Phase: one-run audits.  m canary pairs in a single training run of the one-run
# experiment's base settings (one per q), estimated by the one-run methods; a figure sets
# them beside the R-run audit of the same canary family and the final-iterate ceiling.

# Plotting takes seconds: run where the workflow was started.
localrules:
    one_run_figure,


# A job's trainings for its requests: repeats, each on the training set and the m canaries, with
# both members of each pair scored.
ONE_RUN_TRAINING = (lambda wc: ONE["repeats"], lambda wc, v: int(v["n_train"]) + ONE["canaries"],
                    lambda wc, v: 2 * ONE["canaries"], lambda wc: False)   # m canaries' rows: in full


rule one_run:
    """repeats independent one-run audits of one canary kind at one setting: each a single
    DP training holding one member of each of m canary pairs."""
    input:
        features=lambda wc: S.path("features", exp=wc.exp),
        calibration=lambda wc: artifact("calibration", wc),
    output:
        scores=PATHS["one_run_scores"],
        estimates=PATHS["one_run"],
    wildcard_constraints:
        kind=one_of(CANARY_KINDS),
    params:
        **knobs("hidden", "optimizer", "init", "clip", "lr", "steps", "q"),
        canaries=ONE["canaries"],
        repeats=ONE["repeats"],
        methods=ONE["methods"],
        family=ONE["family"],
        delta=config["delta"],
        alpha=config["alpha"],
        device=NAT["device"],
        seed=lambda wc: S.seed(config["seed"], "one-run", {**values(wc), "kind": wc.kind}),
    threads: 1
    log:
        "logs/one_run/{exp}/{kind}_{key}.log",
    benchmark:
        "logs/benchmarks/one_run/{exp}/{kind}_{key}.tsv"
    resources:
        **requests(training_request(*ONE_RUN_TRAINING)),
        gpu=GPUS,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/one_run.py"


rule one_run_figure:
    """One-run audits beside the R-run audits of the same canary family and the ceiling."""
    input:
        one_run=one_run_files("one_run"),
        calibrations=lambda wc: list(dict.fromkeys(setting_path("calibration", s) for s in one_run_settings())),
        estimates=lambda wc: [setting_path("estimates", s) for s in BASE
                              if s.experiment == ONE["experiment"] and s.scenario in
                              {CANARY_KINDS[k].compare_with for k in ONE["kinds"]}],
    output:
        **figure_files(),
    wildcard_constraints:
        name=figs("one-run"),
    params:
        compare_with={k: CANARY_KINDS[k].compare_with for k in ONE["kinds"]},
        estimator=config["estimators"][0],
        experiment=ONE["experiment"],
        source=EXPERIMENTS[ONE["experiment"]]["source"],
        backbone=EXPERIMENTS[ONE["experiment"]]["backbone"],
    log:
        FIGURE_LOG,
    benchmark:
        FIGURE_BENCHMARK
    resources:
        **FIGURE_RESOURCES,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/one_run_figure.py"
