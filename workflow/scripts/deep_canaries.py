"""Snakemake adapter: every input canary kind's pairs for the deep-network audits."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.devices import resolve_device, use_threads
from subaudit.integrations.deep import load_data, make_canaries, save_canaries
from subaudit.pipeline import logs

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p = snakemake.params
data = load_data(snakemake.input[0], p.source, p.sizes, p.seed)
device = resolve_device(p.device)
log.info("device %s", device)
pairs = make_canaries(data, p.kinds, p.canaries, seed=p.seed, metagradient=p.metagradient, progress=True,
                      device=device)
for kind, pair in pairs.items():
    log.info("%s: %d pairs, pixel mean %.4f", kind, pair.count, float(pair.x.mean()))
save_canaries(snakemake.output[0], pairs)
