"""Snakemake adapter: one-run audits of one canary kind at one setting."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.pipeline import logs
from subaudit.pipeline.job_inputs import load_setting
from subaudit.devices import resolve_device, use_threads
from subaudit.artifacts import write_json, write_npz
from subaudit.scenarios.one_run_canaries import CANARY_KINDS, one_run_audit, one_run_estimates
from subaudit.pipeline.settings import parse_key

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p, wc, inp = snakemake.params, snakemake.wildcards, snakemake.input
feats, model, _, dp = load_setting(inp.features, inp.calibration, hidden=p.hidden, steps=p.steps,
                                   q=p.q, clip=p.clip, lr=p.lr, optimizer=p.optimizer)
canary = CANARY_KINDS[wc.kind].make(model, feats["train"], feats["aux"], dp, p.canaries, init=p.init,
                                    seed=p.seed)
audit = one_run_audit(model, feats["train"], canary, dp, seed=p.seed, repeats=p.repeats, init=p.init,
                      device=resolve_device(p.device))
setting = {"experiment": wc.exp, "kind": wc.kind, **parse_key(wc.key), "sigma": dp.noise_multiplier}
# wall time goes to the log (and the rule's benchmark), never into the versioned estimates
records = [{**rec, **setting} for rec in one_run_estimates(audit, p.delta, p.alpha, p.methods, family=p.family,
                                                            dp=dp)]
log.info("%s %s: %d canaries, %.1f s per run: %s", wc.kind, wc.key, canary.count,
         audit.seconds / p.repeats, [(r["method"], round(r["epsilon"], 3)) for r in records])
write_npz(snakemake.output.scores, scores=audit.scores, bits=audit.bits)
write_json(snakemake.output.estimates, {"estimates": records})
