# Phase: figures, each as results/figures/<name>.png and .pdf with <name>.csv beside them.

# Seconds of plotting each: not worth a cluster submission.
localrules:
    fig2,
    figA5,
    natural_figure,
    figA1,


rule fig2:
    """Fig 2: eps_S / group / eps_AR accounting and audited epsilon against the target."""
    input:
        calibrations=[f"results/accounting/s1/q{fmt(q)}_eps{fmt(e)}.json"
                      for q in S1["sampling_rates"] for e in S1["target_epsilons"]],
        estimates=[f"results/s1/estimates/{k}.json" for k in S1_KEYS],
    output:
        png="results/figures/fig2.png",
        pdf="results/figures/fig2.pdf",
        csv="results/figures/fig2.csv",
    params:
        adjacency=S1["adjacency"],
    log:
        "logs/figures/fig2.log",
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/fig2.py"


rule figA5:
    """Fig A5: eps_S / eps_AR over the q x sigma grid at fixed delta."""
    input:
        [f"results/accounting/ratio_grid/q{fmt(q)}.csv" for q in GRID["sampling_rates"]],
    output:
        png="results/figures/figA5.png",
        pdf="results/figures/figA5.pdf",
        csv="results/figures/figA5.csv",
    log:
        "logs/figures/figA5.log",
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/figA5.py"


rule natural_figure:
    """Epsilon against step for every scenario, per q, of one experiment (Figs 3, A6, 4)."""
    input:
        calibrations=lambda wc: list(dict.fromkeys(
            setting_path("calibration", s) for s in experiment_settings(wc.name))),
        estimates=lambda wc: [setting_path("estimates", s) for s in experiment_settings(wc.name)],
    output:
        png="results/figures/{name}.png",
        pdf="results/figures/{name}.pdf",
        csv="results/figures/{name}.csv",
    wildcard_constraints:
        name="|".join(FIG_EXPERIMENT),
    params:
        experiment=lambda wc: FIG_EXPERIMENT[wc.name],
        source=lambda wc: EXPERIMENTS[FIG_EXPERIMENT[wc.name]]["source"],
        backbone=lambda wc: EXPERIMENTS[FIG_EXPERIMENT[wc.name]]["backbone"],
        family=lambda wc: family(FIG_EXPERIMENT[wc.name]),
    log:
        "logs/figures/{name}.log",
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/natural_figure.py"


rule figA1:
    """Fig A1: test accuracy over training, with the target vs with the canary."""
    input:
        [setting_path("utility", s) for s in utility_settings()],
    output:
        png="results/figures/figA1.png",
        pdf="results/figures/figA1.pdf",
        csv="results/figures/figA1.csv",
    params:
        source=EXPERIMENTS.get(UTILITY_EXPERIMENT, {}).get("source"),
        backbone=EXPERIMENTS.get(UTILITY_EXPERIMENT, {}).get("backbone"),
        q=fmt(utility_settings()[0].q) if utility_settings() else None,
    log:
        "logs/figures/figA1.log",
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/figA1.py"
