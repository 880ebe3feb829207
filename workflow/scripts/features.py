"""Snakemake adapter: backbone features of a split (binary tabular features pass through)."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import numpy as np

from subaudit.pipeline import logs
from subaudit.data import load_split
from subaudit.data.features import split_features
from subaudit.artifacts import write_npz

log = logs.start(snakemake.log[0])
p = snakemake.params
parts = dict(zip(("train", "aux", "test"), load_split(snakemake.input[0])))
arrays = split_features(parts, p.backbone, resolution=p.resolution, device=p.device,
                        weights_checksum=p.weights_checksum,
                        key=f"natural.experiments.{snakemake.wildcards.exp}.weights_checksum")
log.info("features: %s", {name: a.shape for name, a in arrays.items() if name.endswith("_x")})
write_npz(snakemake.output[0], classes=np.array(parts["train"].classes), backbone=np.array(p.backbone), **arrays)
