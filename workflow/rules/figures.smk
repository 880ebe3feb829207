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
        calibrations=[f"results/accounting/s1/q{q}_eps{e}.json" for q, e in S1_SETTINGS],
        estimates=[
            f"results/s1/estimates/q{q}_eps{e}_rep{r}.json"
            for q, e in S1_SETTINGS
            for r in S1_REPEATS
        ],
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
    script:
        "../scripts/figA5.py"


rule natural_figure:
    """Figs 3 (image), A6 (text), 4 (tabular): epsilon against step for S2-S5, per q."""
    input:
        accounting=lambda wc: [
            f"results/natural/{FIG_EXPERIMENT[wc.name]}/accounting/q{q}.csv"
            for q in nat_qs(FIG_EXPERIMENT[wc.name])
        ],
        estimates=lambda wc: [
            f"results/natural/{FIG_EXPERIMENT[wc.name]}/estimates/{s}_q{q}_rep{r}.json"
            for s in NAT["scenarios"]
            for q in nat_qs(FIG_EXPERIMENT[wc.name])
            for r in NAT_REPEATS
        ],
    output:
        png="results/figures/{name}.png",
        pdf="results/figures/{name}.pdf",
        csv="results/figures/{name}.csv",
    wildcard_constraints:
        name="fig3|figA6|fig4",
    params:
        experiment=lambda wc: FIG_EXPERIMENT[wc.name],
        source=lambda wc: EXPERIMENTS[FIG_EXPERIMENT[wc.name]]["source"],
        backbone=lambda wc: EXPERIMENTS[FIG_EXPERIMENT[wc.name]]["backbone"],
    log:
        "logs/figures/{name}.log",
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/natural_figure.py"


rule figA1:
    """Fig A1: test accuracy over training, with the target vs with the canary (image)."""
    input:
        [f"results/natural/image/utility/{s}.csv" for s in UTILITY_SCENARIOS],
    output:
        png="results/figures/figA1.png",
        pdf="results/figures/figA1.pdf",
        csv="results/figures/figA1.csv",
    params:
        source=EXPERIMENTS["image"]["source"],
        backbone=EXPERIMENTS["image"]["backbone"],
        q=nat_qs("image")[0],
    log:
        "logs/figures/figA1.log",
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/figA1.py"
