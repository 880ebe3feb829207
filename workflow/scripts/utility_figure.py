"""Snakemake adapter: Fig A1 (test accuracy with and without the canary) as PNG, PDF, CSV."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import pandas as pd

from subaudit.reporting import figures
from subaudit.pipeline import logs
from subaudit.artifacts import read_csv, write_csv
from subaudit.reporting.tables import utility_table

log = logs.start(snakemake.log[0])
p = snakemake.params
runs = pd.concat([read_csv(f) for f in snakemake.input], ignore_index=True)
table = utility_table(runs.to_dict("records"))
log.info("table:\n%s", table.to_string())
write_csv(snakemake.output.csv, table)
fig = figures.utility(table, f"Utility: {p.source} with {p.backbone} features, q = {p.q}")
figures.save(fig, snakemake.output.png, snakemake.output.pdf, p.paper)
