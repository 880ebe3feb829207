"""Snakemake adapter: simulate one repeat of the S1 audit at the calibrated sigma."""

import numpy as np

from subaudit import logs
from subaudit.io import read_json, write_npz
from subaudit.worst_case import simulate_s1

log = logs.to_file(snakemake.log[0])
p = snakemake.params
cal = read_json(snakemake.input.calibration)
audit = simulate_s1(cal["sigma"], cal["q"], p.steps, p.runs_per_world,
                    adjacency=p.adjacency, seed=p.seed, checkpoints=p.checkpoints)
log.info("simulated %d runs per world, sigma %.6g, q %g, seed %d",
         p.runs_per_world, cal["sigma"], cal["q"], p.seed)
write_npz(snakemake.output[0], scores=audit.scores, labels=audit.labels,
          steps=np.asarray(audit.steps), sigma=np.float64(cal["sigma"]), q=np.float64(cal["q"]))
