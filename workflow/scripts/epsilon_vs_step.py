"""Snakemake adapter: a natural-data audit figure (Fig 3, A6 or 4) as PNG, PDF and CSV."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import pandas as pd

from subaudit.reporting import figures
from subaudit.pipeline import logs
from subaudit.pipeline.score_files import pooled_estimates, read_scores
from subaudit.artifacts import read_csv, read_json, write_csv
from subaudit.reporting.tables import natural_table

log = logs.start(snakemake.log[0])
p = snakemake.params
acc = pd.concat([read_csv(f) for f in snakemake.input.calibrations], ignore_index=True)
estimates = [rec for f in snakemake.input.estimates for rec in read_json(f)["estimates"]]
pooled = pooled_estimates([read_scores(f) for f in snakemake.input.scores], p.delta, p.alpha, p.estimators)
table = natural_table(acc, estimates, pooled)
table.insert(0, "experiment", p.experiment)
log.info("table:\n%s", table.to_string())
write_csv(snakemake.output.csv, table)
title = p.family.capitalize() + (" (from scratch)" if p.backbone == "none" else "")
if p.experiment != p.family:
    title = f"{p.experiment}, {title.lower()}"
fig = figures.epsilon_vs_step(table, f"{title}: {p.source} with {p.backbone} features"
                      if p.backbone != "none" else f"{title}: {p.source}")
figures.save(fig, snakemake.output.png, snakemake.output.pdf, p.paper)
