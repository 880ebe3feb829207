"""Snakemake adapter: simulate the S1 audits of one q (every target and repeat) at their
calibrated sigmas."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from pathlib import Path

import numpy as np

from subaudit.pipeline import logs
from subaudit.artifacts import read_json
from subaudit.pipeline.score_files import Scores, write_scores
from subaudit.pipeline.settings import key, parse_key
from subaudit.scenarios.s1 import simulate_s1

log = logs.start(snakemake.log[0])
p = snakemake.params
calibrations = {Path(f).stem: read_json(f) for f in snakemake.input}
for out, seed in zip(snakemake.output, p.seeds):
    setting = parse_key(Path(out).stem)
    cal = calibrations[key(("q", "target_epsilon"), setting)]
    audit = simulate_s1(cal["sigma"], cal["q"], p.steps, p.runs_per_world,
                        adjacency=p.adjacency, seed=seed, checkpoints=p.checkpoints)
    log.info("%s: %d runs per world, sigma %.6g, seed %d", Path(out).stem, p.runs_per_world,
             cal["sigma"], seed)
    write_scores(out, Scores(runs=np.arange(audit.labels.size), bits=audit.labels,
                             steps=np.asarray(audit.steps), scores=audit.scores,
                             sigma=float(cal["sigma"]), setting=setting))
