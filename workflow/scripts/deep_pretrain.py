"""Snakemake adapter: the fine-tuning case's network, pretrained without privacy on public images."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import torch

from subaudit.devices import resolve_device, use_threads
from subaudit.integrations.deep import accuracy, load_data, pretrain, save_weights
from subaudit.integrations.networks import build
from subaudit.pipeline import logs

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p = snakemake.params
data = load_data(snakemake.input[0], p.source, p.sizes, p.seed)
state = pretrain(p.network, data, seed=p.seed, device=str(resolve_device(p.device)), progress=True, **p.pretrain)
channels, side = data.shape
model = build(p.network, classes=data.classes, channels=channels, size=side, seed=0)
model.load_state_dict(state)
log.info("pretrained %s on %d public images: test accuracy %.4f", p.network, len(data.public[1]),
         accuracy(model, *data.test))
with torch.no_grad():
    save_weights(snakemake.output[0], state)
