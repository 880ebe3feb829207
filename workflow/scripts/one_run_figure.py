"""Snakemake adapter: the one-run figure (one-run audits, R-run audits, ceiling) as PNG, PDF, CSV."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import pandas as pd

from subaudit.reporting import figures
from subaudit.pipeline import logs
from subaudit.artifacts import read_csv, read_json, write_csv
from subaudit.reporting.tables import one_run_table

log = logs.start(snakemake.log[0])
p = snakemake.params
acc = pd.concat([read_csv(f) for f in snakemake.input.calibrations], ignore_index=True)
one = [rec for f in snakemake.input.one_run for rec in read_json(f)["estimates"]]
r_run = [rec for f in snakemake.input.estimates for rec in read_json(f)["estimates"]]
table = one_run_table(acc, one, r_run, p.compare_with, p.estimator)
table.insert(0, "experiment", p.experiment)
log.info("table:\n%s", table.to_string())
write_csv(snakemake.output.csv, table)
fig = figures.one_run(table, f"One-run against R-run audits: {p.source} with {p.backbone} features")
figures.save(fig, snakemake.output.png, snakemake.output.pdf)
