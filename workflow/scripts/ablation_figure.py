"""Snakemake adapter: an ablation figure (Figs A2-A4) as PNG, PDF and CSV."""

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
acc = pd.concat([read_csv(path).assign(**{p.knob: value})
                 for value, path in p.calibrations.items()], ignore_index=True)
estimates = [rec for f in snakemake.input.estimates for rec in read_json(f)["estimates"]]
pooled = pooled_estimates([read_scores(f) for f in snakemake.input.scores], p.delta, p.alpha, p.estimators)
table = natural_table(acc, estimates, pooled, panel=p.knob)
table.insert(0, "experiment", p.experiment)
log.info("table:\n%s", table.to_string())
write_csv(snakemake.output.csv, table)
caption = p.caption[0].upper() + p.caption[1:]
fig = figures.epsilon_vs_step(table, f"{caption}: {p.source} with {p.backbone} features"
                              if p.backbone != "none" else f"{caption}: {p.source}", panel=p.knob)
figures.save(fig, snakemake.output.png, snakemake.output.pdf, p.paper)
