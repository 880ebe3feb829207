"""Snakemake adapter: S3 / S4 / S5 input-space canary from the reference model."""

import torch

from subaudit import logs
from subaudit.audit import load_features, model_for, save_canary
from subaudit.canaries import craft_input, craft_mislabeled, craft_natural
from subaudit.io import read_json, read_npz, write_json

log = logs.to_file(snakemake.log[0])
p, scenario = snakemake.params, snakemake.wildcards.scenario
feats = load_features(snakemake.input.features)
model = model_for(feats, p.hidden)
ref = read_npz(snakemake.input.reference)
params = [torch.from_numpy(ref[f"p{i}"]) for i in range(len(ref))]
target = read_json(snakemake.input.info)["target"]
x, y = feats["train"].x[target], int(feats["train"].y[target])
if scenario == "S3":
    crafted = craft_input(model, params, x, y, steps=p.craft_steps, lr=p.craft_lr)
elif scenario == "S4":
    crafted = craft_mislabeled(model, params, x, y)
else:
    crafted = craft_natural(model, params, x, y, feats["aux"])
save_canary(snakemake.output.canary, crafted.canary)
log.info("%s", crafted.info)
write_json(snakemake.output.info, {"scenario": scenario, "target": target, **crafted.info})
