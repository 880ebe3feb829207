"""Snakemake adapter: S2 crafted gradient canary (Algorithm 2) at one q."""

from subaudit import logs
from subaudit.audit import load_features, model_for, save_canary
from subaudit.canaries import craft_gradient
from subaudit.engine import DPConfig
from subaudit.io import write_json

log = logs.to_file(snakemake.log[0])
p = snakemake.params
feats = load_features(snakemake.input[0])
model = model_for(feats, p.hidden)
dp = DPConfig(steps=p.steps, sampling_rate=p.q, noise_multiplier=0.0, clip=p.clip, lr=p.lr,
              optimizer=p.optimizer)
crafted = craft_gradient(model, feats["train"], dp, init=p.init, seed=p.seed)
save_canary(snakemake.output.canary, crafted.canary)
log.info("%s", crafted.info)
write_json(snakemake.output.info, {"scenario": "S2", "q": p.q, **crafted.info})
