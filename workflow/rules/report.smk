# Phase: the report. Every figure with its final-step table and one verdict per claim of the
# paper, computed from the figures' CSVs (subaudit.reporting.claims), as Markdown, HTML and metrics JSON.

localrules:
    report,


rule report:
    """results/report.md, .html and .json (DVC metrics) from every figure's CSV."""
    input:
        expand(PATHS["figure"], name=list(FIGS), ext="csv"),
        expand(PATHS["figure"], name=list(FIGS), ext="png"),
    output:
        md=S.path("report", ext="md"),
        html=report(S.path("report", ext="html"), caption="../report/report.rst", category="Report"),
        json=S.path("report", ext="json"),
    params:
        figures=report_figures(),
        estimator=REPORT_ESTIMATOR,
        natural={experiment_figure(e).name: EXPERIMENTS[e]["backbone"] == "none" for e in EXPERIMENTS},
        ablations={f.knob: f.name for f in FIGS.values() if f.kind == "ablation"},
        base={k: EXPERIMENTS[ABL["experiment"]][k] for k in S.ABLATED},
        runs=NAT["runs"],
        delta=config["delta"],
        alpha=config["alpha"],
        settings={
            "seed": config["seed"],
            "delta": config["delta"],
            "alpha (1 - confidence)": config["alpha"],
            "natural-data audits: R runs per setting, repeats": f"{NAT['runs']}, {NAT['repeats']}",
            "natural-data target eps_S": NAT["target_epsilon"],
            "ablations: experiment, repeats": f"{ABL['experiment']}, {ABL['repeats']}",
            "S1: runs per world, repeats": f"{S1['runs_per_world']}, {S1['repeats']}",
            "experiments": ", ".join(f"{e} ({v['source']}, {v['backbone']})"
                                     for e, v in EXPERIMENTS.items()),
            **S.switch_settings(NAT),
        },
    log:
        "logs/report.log",
    benchmark:
        "logs/benchmarks/report.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/report.py"
