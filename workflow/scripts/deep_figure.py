"""Snakemake adapter: the deep-network audits' bounds and figure (Table 2 shaped) as PNG, PDF, CSV."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.artifacts import write_csv
from subaudit.integrations.deep import audit_rows, load_audit
from subaudit.pipeline import logs
from subaudit.reporting import figures
from subaudit.reporting.tables import deep_summary, deep_table

log = logs.start(snakemake.log[0])
p = snakemake.params
table = deep_table([audit_rows(load_audit(f), delta=p.delta, alpha=p.alpha, procedures=p.procedures,
                               family=p.family, white_box_families=p.white_box_families,
                               bonferroni=p.bonferroni)
                    for f in snakemake.input])
log.info("Table 2 shape (%s):\n%s", p.score, deep_summary(table, p.score).to_string())
write_csv(snakemake.output.csv, table)
fig = figures.deep_one_run(table, p.score, f"One-run audits of {p.network} trained with Opacus on {p.source}")
figures.save(fig, snakemake.output.png, snakemake.output.pdf)
