"""Snakemake adapter: one scenario's canary pair, crafted through the scenario registry."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import torch

from subaudit.pipeline import logs
from subaudit.devices import use_threads
from subaudit.pipeline.job_inputs import load_features, model_for, save_canary
from subaudit.engine import DPConfig
from subaudit.artifacts import read_csv, read_json, read_npz, write_json
from subaudit.scenarios import CraftInputs, get

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p, scenario = snakemake.params, get(snakemake.wildcards.scenario)
feats = load_features(snakemake.input.features)
model = model_for(feats, p.hidden)
inputs = dict(model=model, features=feats, init=p.init, seed=p.seed, options=p.options)
if scenario.per_q:
    k = p.knobs
    sigma = float(read_csv(snakemake.input.calibration)["sigma"].iloc[0]) if scenario.noisy else 0.0
    inputs["dp"] = DPConfig(steps=k["steps"], sampling_rate=k["q"], noise_multiplier=sigma,
                            clip=k["clip"], lr=k["lr"], optimizer=p.optimizer, canary_sampling_rate=p.canary_q)
if scenario.needs_reference:
    ref = read_npz(snakemake.input.reference)
    inputs["reference"] = [torch.from_numpy(ref[f"p{i}"]) for i in range(len(ref))]
    inputs["target"] = int(read_json(snakemake.input.target)["target"])
crafted = scenario.craft(CraftInputs(**inputs))
save_canary(snakemake.output.canary, crafted.canary)
log.info("%s", crafted.info)
write_json(snakemake.output.info, {"scenario": scenario.name, **p.knobs,
                                   **({"target": inputs["target"]} if "target" in inputs else {}),
                                   **crafted.info})
