"""Snakemake adapter: simulate one repeat of the S1 audit at the calibrated sigma."""

import numpy as np

from subaudit import logs
from subaudit.scores import Scores, write_scores
from subaudit.io import read_json
from subaudit.settings import parse_key
from subaudit.worst_case import simulate_s1

log = logs.to_file(snakemake.log[0])
p = snakemake.params
cal = read_json(snakemake.input.calibration)
audit = simulate_s1(cal["sigma"], cal["q"], p.steps, p.runs_per_world,
                    adjacency=p.adjacency, seed=p.seed, checkpoints=p.checkpoints)
log.info("simulated %d runs per world, sigma %.6g, q %g, seed %d",
         p.runs_per_world, cal["sigma"], cal["q"], p.seed)
write_scores(snakemake.output[0], Scores(
    runs=np.arange(audit.labels.size), bits=audit.labels, steps=np.asarray(audit.steps),
    scores=audit.scores, sigma=float(cal["sigma"]), setting=parse_key(snakemake.wildcards.key)))
