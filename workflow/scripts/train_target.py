"""Snakemake adapter: DP training of the runs with the target z of one shard, once for the
scenarios sharing that world; each scenario's scores at every checkpoint."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import numpy as np

from subaudit.devices import resolve_device, use_threads
from subaudit.engine import train
from subaudit.pipeline import logs
from subaudit.pipeline.job_inputs import audit_data, load_canary, load_setting
from subaudit.pipeline.score_files import run_bits, world_index, write_target_scores
from subaudit.pipeline.settings import parse_key

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p, wc, inp = snakemake.params, snakemake.wildcards, snakemake.input
feats, model, target, dp = load_setting(
    inp.features, inp.calibration, inp.target,
    hidden=p.hidden, steps=p.steps, q=p.q, clip=p.clip, lr=p.lr, optimizer=p.optimizer,
    canary_q=p.canary_q)
runs = np.arange(p.lo, p.hi)
runs = runs[run_bits(runs) == 1]
canaries = [load_canary(f) for f in inp.canaries]
device = resolve_device(p.device)
res = train(model, audit_data(feats["train"], target, p.scenarios[0]), canaries[0], dp, seed=p.seed,
            runs=world_index(runs), bits=run_bits(runs), score_every=p.every, init=p.init, memory_mb=p.memory_mb,
            device=device, also=canaries[1:])
scores = dict(zip(p.scenarios, [res.scores, *res.also]))
log.info("target world of %s, %s runs %d-%d on %s: sigma %.4g, final mean score %s", ", ".join(p.scenarios),
         wc.key, p.lo, p.hi, device, dp.noise_multiplier, {k: float(v[-1].mean()) for k, v in scores.items()})
write_target_scores(snakemake.output[0], runs, res.steps, dp.noise_multiplier, scores,
                    {"experiment": wc.exp, **parse_key(wc.key), "device": device})
