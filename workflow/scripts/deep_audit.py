"""Snakemake adapter: one one-run audit of a deep network trained with Opacus."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.devices import resolve_device, use_threads
from subaudit.integrations.deep import Training, load_canaries, load_data, load_weights, run_audit, save_audit
from subaudit.pipeline import logs

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p, wc, inp = snakemake.params, snakemake.wildcards, snakemake.input
data = load_data(inp.archive, p.source, p.sizes, p.seed)
init = load_weights(inp.pretrained[0]) if inp.pretrained else None
pairs = {kind: made for kind, made in load_canaries(inp.canaries).items() if kind in p.kinds}
training = Training(**p.training, physical_batch=p.physical_batch, precision=p.precision)
audit = run_audit(wc.case, wc.game, int(wc.repeat), data=data, pairs=pairs, network=p.network,
                  training=training, gradient_canaries=p.gradient_canaries, init=init,
                  scores=p.scores, seed=p.seed, group=wc.group, gradient_width=p.gradient_width,
                  gradient_scores=p.gradient_scores,
                  device=str(resolve_device(p.device)), progress=True)
# Seconds stay in the log and the benchmark file, never in versioned results.
examples = audit.info["examples"]
log.info("%s %s %s %s: %d examples in %.1f s (%.0f examples/s with Opacus), test accuracy %.4f, history %s",
         wc.case, wc.game, wc.group, wc.repeat, examples, audit.seconds, examples / audit.seconds,
         audit.info["test_accuracy"], audit.history)
save_audit(snakemake.output[0], audit)
