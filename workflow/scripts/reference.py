"""Snakemake adapter: non-DP reference model and the least-confident target record."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import numpy as np

from subaudit.pipeline import logs
from subaudit.devices import use_threads
from subaudit.pipeline.job_inputs import load_features, model_for
from subaudit.scenarios.crafting import reference_model
from subaudit.artifacts import write_json, write_npz

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p = snakemake.params
feats = load_features(snakemake.input[0])
model = model_for(feats, p.hidden)
params, confidence = reference_model(model, feats["train"], steps=p.steps, lr=p.lr,
                                     optimizer=p.optimizer, init=p.init, seed=p.seed,
                                     every=p.every, sampling_rate=p.q)
target = int(np.argmin(confidence))
write_npz(snakemake.output.params, **{f"p{i}": t.numpy() for i, t in enumerate(params)})
info = {"target": target, "sampling_rate": p.q, "target_label": int(feats["train"].y[target]),
        "target_confidence": float(confidence[target]),
        "mean_confidence": float(confidence.mean()), "sizes": list(model.sizes)}
log.info("%s", info)
write_json(snakemake.output.info, info)
