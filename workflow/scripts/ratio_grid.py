"""Snakemake adapter: Fig A5 (eps_S / eps_AR over q and sigma) as PNG, PDF and CSV."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.reporting import figures
from subaudit.pipeline import logs
from subaudit.artifacts import read_csv, write_csv
from subaudit.reporting.tables import figA5_table

log = logs.start(snakemake.log[0])
table = figA5_table(read_csv(f, keep_default_na=False, na_values=[""]) for f in snakemake.input)
log.info("figA5 table:\n%s", table.to_string())
write_csv(snakemake.output.csv, table)
figures.save(figures.ratio_grid(table), snakemake.output.png, snakemake.output.pdf,
             snakemake.params.paper)
