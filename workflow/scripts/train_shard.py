"""Snakemake adapter: DP training of one shard of runs; scores at every checkpoint."""

import numpy as np

from subaudit import logs
from subaudit.audit import audit_data, load_canary, load_setting, run_bits
from subaudit.devices import resolve_device
from subaudit.engine import train
from subaudit.io import write_npz

log = logs.to_file(snakemake.log[0])
p, wc = snakemake.params, snakemake.wildcards
feats, model, target, dp = load_setting(
    snakemake.input.features, snakemake.input.target, snakemake.input.accounting,
    hidden=p.hidden, steps=p.steps, q=p.q, clip=p.clip, lr=p.lr, optimizer=p.optimizer)
runs = np.arange(p.lo, p.hi)
device = resolve_device(p.device)
res = train(model, audit_data(feats["train"], target, wc.scenario),
            load_canary(snakemake.input.canary), dp, seed=p.seed, runs=runs,
            bits=run_bits(runs), score_every=p.every, init=p.init, memory_mb=p.memory_mb,
            device=device)
log.info("%s q=%s rep=%s runs %d-%d on %s: sigma %.4g, final mean score D %.4g, D' %.4g",
         wc.scenario, wc.q, wc.rep, p.lo, p.hi, device, dp.noise_multiplier,
         res.scores[-1][res.bits == 1].mean(), res.scores[-1][res.bits == 0].mean())
write_npz(snakemake.output[0], runs=res.runs, bits=res.bits, steps=res.steps, scores=res.scores,
          sigma=np.array(dp.noise_multiplier), device=np.array(device))
