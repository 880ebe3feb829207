"""Snakemake adapter: the deep-network audits' figure (Table 2 shaped) as PNG, PDF, CSV, from each audit's bounds."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.artifacts import read_json, write_csv
from subaudit.pipeline import logs
from subaudit.reporting import figures
from subaudit.reporting.tables import deep_summary, deep_table

log = logs.start(snakemake.log[0])
p = snakemake.params
table = deep_table([read_json(f)["rows"] for f in snakemake.input])
log.info("Table 2 shape (%s):\n%s", p.score, deep_summary(table, p.score).to_string())
write_csv(snakemake.output.csv, table)
fig = figures.deep_one_run(table, p.score, f"One-run audits of {p.network} trained with Opacus on {p.source}")
figures.save(fig, snakemake.output.png, snakemake.output.pdf)
