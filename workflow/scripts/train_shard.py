"""Snakemake adapter: DP training of one shard of runs; scores at every checkpoint."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import numpy as np

from subaudit.pipeline import logs
from subaudit.pipeline.job_inputs import audit_data, load_canary, load_setting
from subaudit.devices import resolve_device, use_threads
from subaudit.engine import train
from subaudit.pipeline.score_files import Scores, run_bits, world_index, write_scores
from subaudit.pipeline.settings import parse_key

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p, wc, inp = snakemake.params, snakemake.wildcards, snakemake.input
feats, model, target, dp = load_setting(
    inp.features, inp.calibration, inp.get("target"),
    hidden=p.hidden, steps=p.steps, q=p.q, clip=p.clip, lr=p.lr, optimizer=p.optimizer,
    canary_q=p.canary_q)
runs = np.arange(p.lo, p.hi)
if p.substitute_only:    # its runs with z are trained once for several scenarios (train_target)
    runs = runs[run_bits(runs) == 0]
device = resolve_device(p.device)
res = train(model, audit_data(feats["train"], target, wc.scenario), load_canary(inp.canary),
            dp, seed=p.seed, runs=world_index(runs) if p.substitute_only else runs, bits=run_bits(runs),
            score_every=p.every, init=p.init, memory_mb=p.memory_mb, device=device)
log.info("%s %s runs %d-%d on %s: sigma %.4g, final mean score %s", wc.scenario, wc.key, p.lo, p.hi,
         device, dp.noise_multiplier, {f"bit {b}": float(res.scores[-1][res.bits == b].mean())
                                       for b in np.unique(res.bits)})
setting = {"experiment": wc.exp, "scenario": wc.scenario, **parse_key(wc.key), "device": device}
write_scores(snakemake.output[0], Scores(runs=runs, bits=res.bits, steps=res.steps,
                                         scores=res.scores, sigma=dp.noise_multiplier,
                                         setting=setting))
