"""Snakemake adapter: calibrate sigma for each target eps_S at one q and record all accountants."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.pipeline import logs
from subaudit.artifacts import write_json
from subaudit.accounting.grids import s1_calibration

log = logs.start(snakemake.log[0])
p = snakemake.params
for target, path in zip(p.target_epsilons, snakemake.output):
    record = s1_calibration(target, p.q, p.steps, p.delta)
    log.info("calibration: %s", record)
    write_json(path, record)
