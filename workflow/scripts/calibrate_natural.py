"""Snakemake adapter: sigma for the target eps_S at (q, T); eps_S and eps_AR per checkpoint."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.pipeline import logs
from subaudit.accounting import calibrate_sigma
from subaudit.artifacts import write_csv
from subaudit.accounting.grids import step_accounting

log = logs.start(snakemake.log[0])
p = snakemake.params
sigma = calibrate_sigma(p.target_epsilon, p.q, p.steps, p.delta, "substitute")
table = step_accounting(sigma, p.q, p.checkpoints, p.delta)
table["target_epsilon"] = p.target_epsilon
log.info("\n%s", table.to_string())
write_csv(snakemake.output[0], table)
