"""Snakemake adapter: eps_S and eps_AR over the sigma grid for one q (Fig A5 row)."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.pipeline import logs
from subaudit.artifacts import write_csv
from subaudit.accounting.grids import ratio_grid_row

log = logs.start(snakemake.log[0])
p = snakemake.params
row = ratio_grid_row(p.q, p.sigmas, p.steps, p.delta)
log.info("ratio grid row:\n%s", row.to_string())
write_csv(snakemake.output[0], row)
