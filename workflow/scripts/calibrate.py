"""Snakemake adapter: calibrate sigma for one (q, target eps_S) and record all accountants."""

from subaudit import logs
from subaudit.io import write_json
from subaudit.tables import s1_calibration

log = logs.to_file(snakemake.log[0])
p = snakemake.params
record = s1_calibration(p.target_epsilon, p.q, p.steps, p.delta)
log.info("calibration: %s", record)
write_json(snakemake.output[0], record)
