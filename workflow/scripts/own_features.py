"""Snakemake adapter: a user's own features file, verified and split, as a features artifact."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.pipeline import logs
from subaudit.artifacts import write_npz
from subaudit.data.own_features import features

log = logs.start(snakemake.log[0])
p = snakemake.params
arrays = features(snakemake.input[0], p.checksum, n_train=p.n_train, n_aux=p.n_aux,
                  n_test=p.n_test, per_class=p.per_class, seed=p.seed)
log.info("%s: %s", snakemake.input[0], {k: v.shape for k, v in arrays.items()})
write_npz(snakemake.output[0], **arrays)
