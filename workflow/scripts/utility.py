"""Snakemake adapter: test accuracy over training without a canary and with the canary z'."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import numpy as np
import pandas as pd

from subaudit.pipeline import logs
from subaudit.pipeline.job_inputs import audit_data, load_canary, load_setting
from subaudit.devices import resolve_device, use_threads
from subaudit.engine import train
from subaudit.artifacts import write_csv
from subaudit.scenarios import get
from subaudit.schedule import checkpoints

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p, inp = snakemake.params, snakemake.input
scenario = get(snakemake.wildcards.scenario)
feats, model, target, dp = load_setting(
    inp.features, inp.calibration, inp.get("target"),
    hidden=p.hidden, steps=p.steps, q=p.q, clip=p.clip, lr=p.lr, optimizer=p.optimizer,
    canary_q=p.canary_q)
steps = [0, *checkpoints(p.steps, p.every)]
half = p.runs // 2
common = dict(seed=p.seed, score_every=p.every, init=p.init, test=feats["test"],
              accuracy_steps=steps, memory_mb=p.memory_mb,
              device=resolve_device(p.device))
# Without a canary: D as it is, target record included.
plain = train(model, feats["train"], None, dp, runs=np.arange(half), bits=np.ones(half), **common)
# With the canary z' in place of z (world D'), runs disjoint from the plain ones.
poisoned = train(model, audit_data(feats["train"], target, scenario.name),
                 load_canary(inp.canary), dp, runs=np.arange(half, 2 * half),
                 bits=np.zeros(half), **common)
rows = []
for world, res in (("trained on D (target z, no canary)", plain),
                   (f"with canary z' ({scenario.title})", poisoned)):
    for i, step in enumerate(res.accuracy_steps):
        for r, acc in zip(res.runs, res.accuracy[i]):
            rows.append({"scenario": scenario.name, "world": world, "step": int(step),
                         "run": int(r), "accuracy": float(acc), "q": p.q,
                         "sigma": dp.noise_multiplier})
frame = pd.DataFrame(rows)
log.info("final accuracy:\n%s", frame[frame.step == p.steps].groupby("world")["accuracy"].mean())
write_csv(snakemake.output[0], frame)
