# Phase: figures, each as results/figures/<name>.png and .pdf with <name>.csv beside them.

# Seconds of plotting each: not worth a cluster submission.
localrules:
    epsilon_vs_target,
    ratio_grid,
    epsilon_vs_step,
    utility_figure,
    ablation_figure,
    runs_figure,


rule epsilon_vs_target:
    """Fig 2: eps_S / group / eps_AR accounting and audited epsilon against the target (each
    target's repeats pooled into one audit, beside their range)."""
    input:
        calibrations=s1_all("calibration"),
        estimates=s1_all("estimates"),
        scores=s1_all("scores"),
    output:
        **figure_files(),
    wildcard_constraints:
        name=figs("epsilon-vs-target"),
    params:
        adjacency=S1["adjacency"],
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
        paper=lambda wc: FIGS[wc.name].paper,
    log:
        FIGURE_LOG,
    benchmark:
        FIGURE_BENCHMARK
    resources:
        **FIGURE_RESOURCES,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/epsilon_vs_target.py"


rule ratio_grid:
    """Fig A5: eps_S / eps_AR over the q x sigma grid at fixed delta."""
    input:
        [S.path("ratio_grid_row", q=fmt(q)) for q in GRID["sampling_rates"]],
    output:
        **figure_files(),
    wildcard_constraints:
        name=figs("ratio-grid"),
    params:
        paper=lambda wc: FIGS[wc.name].paper,
    log:
        FIGURE_LOG,
    benchmark:
        FIGURE_BENCHMARK
    resources:
        **FIGURE_RESOURCES,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/ratio_grid.py"


rule epsilon_vs_step:
    """Epsilon against step for every scenario, per q, of one experiment (Figs 3, A6, 4): each
    setting's repeats pooled into one audit (from their merged scores), beside their range."""
    input:
        calibrations=lambda wc: list(dict.fromkeys(
            setting_path("calibration", s) for s in experiment_settings(wc.name))),
        estimates=lambda wc: [setting_path("estimates", s) for s in experiment_settings(wc.name)],
        scores=lambda wc: [setting_path("scores", s) for s in experiment_settings(wc.name)],
    output:
        **figure_files(),
    wildcard_constraints:
        name=figs("epsilon-vs-step"),
    params:
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
        experiment=lambda wc: FIGS[wc.name].experiment,
        source=lambda wc: EXPERIMENTS[FIGS[wc.name].experiment]["source"],
        backbone=lambda wc: EXPERIMENTS[FIGS[wc.name].experiment]["backbone"],
        family=lambda wc: family(FIGS[wc.name].experiment),
        paper=lambda wc: FIGS[wc.name].paper,
    log:
        FIGURE_LOG,
    benchmark:
        FIGURE_BENCHMARK
    resources:
        **FIGURE_RESOURCES,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/epsilon_vs_step.py"


rule utility_figure:
    """Fig A1: test accuracy over training, with the target vs with the canary."""
    input:
        lambda wc: [setting_path("utility", s) for s in utility_settings(wc.name)],
    output:
        **figure_files(),
    wildcard_constraints:
        name=figs("utility"),
    params:
        source=lambda wc: EXPERIMENTS[FIGS[wc.name].experiment]["source"],
        backbone=lambda wc: EXPERIMENTS[FIGS[wc.name].experiment]["backbone"],
        q=lambda wc: fmt(utility_settings(wc.name)[0].q),
        paper=lambda wc: FIGS[wc.name].paper,
    log:
        FIGURE_LOG,
    benchmark:
        FIGURE_BENCHMARK
    resources:
        **FIGURE_RESOURCES,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/utility_figure.py"


rule ablation_figure:
    """Figs A2-A4: epsilon against step for S2-S5, one panel per value of the ablated knob."""
    input:
        calibrations=lambda wc: sorted(set(ablation_calibrations(FIGS[wc.name].knob).values())),
        estimates=lambda wc: [setting_path("estimates", s) for s in ABLATIONS[FIGS[wc.name].knob]],
        scores=lambda wc: [setting_path("scores", s) for s in ABLATIONS[FIGS[wc.name].knob]],
    output:
        **figure_files(),
    wildcard_constraints:
        name=figs("ablation"),
    params:
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
        knob=lambda wc: FIGS[wc.name].knob,
        calibrations=lambda wc: ablation_calibrations(FIGS[wc.name].knob),
        experiment=ABL["experiment"],
        source=EXPERIMENTS[ABL["experiment"]]["source"],
        backbone=EXPERIMENTS[ABL["experiment"]]["backbone"],
        caption=lambda wc: FIGS[wc.name].caption,
        paper=lambda wc: FIGS[wc.name].paper,
    log:
        FIGURE_LOG,
    benchmark:
        FIGURE_BENCHMARK
    resources:
        **FIGURE_RESOURCES,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/ablation_figure.py"


rule runs_figure:
    """Fig 5: final-step epsilon against R', the first R' runs of each base audit."""
    input:
        calibrations=lambda wc: sorted({setting_path("calibration", s) for s in runs_settings()}),
        scores=lambda wc: [setting_path("scores", s) for s in runs_settings()],
    output:
        **figure_files(),
    wildcard_constraints:
        name=figs("epsilon-vs-runs"),
    params:
        runs=ABL["runs"],
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
        experiment=ABL["experiment"],
        source=EXPERIMENTS[ABL["experiment"]]["source"],
        backbone=EXPERIMENTS[ABL["experiment"]]["backbone"],
        paper=lambda wc: FIGS[wc.name].paper,
    log:
        FIGURE_LOG,
    benchmark:
        FIGURE_BENCHMARK
    resources:
        **FIGURE_RESOURCES,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/runs_figure.py"
