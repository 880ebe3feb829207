"""Snakemake adapter: backbone features of a split (binary tabular features pass through)."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import numpy as np
import torch

from subaudit.pipeline import logs
from subaudit.data import load_split
from subaudit.data.backbones import BACKBONES
from subaudit.devices import resolve_device
from subaudit.artifacts import write_npz

log = logs.start(snakemake.log[0])
p = snakemake.params
# One CPU thread: kernels split their reductions by thread count, and the features (hence
# every audit) must not depend on the machine's core count. (A GPU gives other bits.)
torch.set_num_threads(1)
device = resolve_device(p.device)
log.info("device %s", device)
parts = dict(zip(("train", "aux", "test"), load_split(snakemake.input[0])))
if p.backbone in BACKBONES and BACKBONES[p.backbone].hub_repo is not None:
    from subaudit.data.features import hub_weights

    # before any work, naming the configuration key of a missing or wrong digest
    key = f"natural.experiments.{snakemake.wildcards.exp}.weights_checksum"
    log.info("weights %s (verified)", hub_weights(p.backbone, p.weights_checksum, key=key))
arrays = {}
for name, ds in parts.items():
    if p.backbone == "none":
        x = ds.x.astype(np.float32)
    elif ds.family == "image":
        from subaudit.data.features import image_features

        x = image_features(ds.x, p.backbone, resolution=p.resolution, device=device,
                           weights_checksum=p.weights_checksum)
    else:
        from subaudit.data.features import text_features

        x = text_features(list(ds.x), p.backbone, device=device)
    arrays[f"{name}_x"], arrays[f"{name}_y"] = x, ds.y
    log.info("%s: features %s", name, x.shape)
classes = parts["train"].classes
write_npz(snakemake.output[0], classes=np.array(classes), backbone=np.array(p.backbone), **arrays)
