"""Snakemake adapter: Fig 2 (S1 audit against the accountants) as PNG, PDF and CSV."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.reporting import figures
from subaudit.pipeline import logs
from subaudit.pipeline.score_files import pooled_estimates, read_scores
from subaudit.artifacts import read_json, write_csv
from subaudit.reporting.tables import fig2_table

log = logs.start(snakemake.log[0])
p = snakemake.params
calibrations = [read_json(f) for f in snakemake.input.calibrations]
estimates = [rec for f in snakemake.input.estimates for rec in read_json(f)["estimates"]]
pooled = pooled_estimates([read_scores(f) for f in snakemake.input.scores], p.delta, p.alpha, p.estimators)
table = fig2_table(calibrations, estimates, pooled, adjacency=p.adjacency)
log.info("fig2 table:\n%s", table.to_string())
write_csv(snakemake.output.csv, table)
figures.save(figures.epsilon_vs_target(table), snakemake.output.png, snakemake.output.pdf,
             p.paper)
