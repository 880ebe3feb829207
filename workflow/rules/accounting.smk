# Phase: privacy accounting: calibrated noise for the S1 grid and for the natural-data audits
# (eps_S and eps_AR at every checkpoint); the Fig A5 ratio grid.


rule calibrate_s1:
    """Noise multipliers reaching each target eps_S at one q, and eps_AR / eps_S / group eps
    at them."""
    output:
        s1_files("calibration"),
    params:
        q=lambda wc: float(wc.q),
        target_epsilons=S1["target_epsilons"],
        steps=S1["steps"],
        delta=config["delta"],
    log:
        "logs/accounting/s1/q{q}.log",
    benchmark:
        "logs/benchmarks/accounting/s1/q{q}.tsv"
    resources:
        **requests(s1_calibration_request),
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/calibrate.py"


rule calibrate_natural:
    """Sigma reaching the target eps_S at (q, T); eps_S and eps_AR at every checkpoint."""
    output:
        PATHS["calibration"],
    params:
        target_epsilon=knob("target_epsilon"),
        steps=knob("steps"),
        checkpoints=lambda wc: [int(t) for t in checkpoints(*map(values(wc).get,
                                                                  ("steps", "every")))],
        q=knob("q"),
        delta=config["delta"],
    log:
        "logs/accounting/natural/{key}.log",
    benchmark:
        "logs/benchmarks/accounting/natural/{key}.tsv"
    priority: UNLOCKS
    resources:
        **requests(natural_calibration_request),
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/calibrate_natural.py"


rule ratio_grid_row:
    """eps_S and eps_AR for one q over the configured noise multipliers (a row of Fig A5)."""
    output:
        PATHS["ratio_grid_row"],
    params:
        q=lambda wc: float(wc.q),
        sigmas=GRID["noise_multipliers"],
        steps=GRID["steps"],
        delta=config["delta"],
    log:
        "logs/accounting/ratio_grid/q{q}.log",
    benchmark:
        "logs/benchmarks/accounting/ratio_grid/q{q}.tsv"
    resources:
        **requests(grid_row_request),
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/ratio_grid_row.py"
