"""Snakemake adapter: deterministic train / aux / test split of a source, saved as .npz."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.pipeline import logs
from subaudit.data import load, save_split, split

log = logs.start(snakemake.log[0])
p = snakemake.params
ds = load(p.source, snakemake.input[0])
sp = split(ds, n_train=p.n_train, n_aux=p.n_aux, n_test=p.n_test, seed=p.seed,
           per_class=p.per_class)
save_split(snakemake.output[0], ds, sp)
log.info("%s: %d records, %d classes -> train %d, aux %d, test %d", p.source, len(ds.y),
         ds.classes, len(sp.train), len(sp.aux), len(sp.test))
