# Phase: figures, each as results/figures/<name>.png and .pdf with <name>.csv beside them.


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
