"""Snakemake adapter: merge the shards of one audit setting (complete, sorted by run) and
estimate epsilon at every recorded step."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.pipeline import logs
from subaudit.artifacts import write_json
from subaudit.pipeline.score_files import (audit_estimates, merge_shards, read_scores, read_target_scores,
                                           write_scores)
from subaudit.pipeline.settings import parse_key

log = logs.start(snakemake.log[0])
p, wc = snakemake.params, snakemake.wildcards
parts = ([read_scores(f) for f in snakemake.input.shards]
         + [read_target_scores(f, wc.scenario) for f in snakemake.input.targets])
setting = {"experiment": wc.exp, "scenario": wc.scenario, **parse_key(wc.key)}
merged = merge_shards(parts, p.runs, setting)
log.info("merged %d shards, %d runs", len(parts), len(merged.runs))
write_scores(snakemake.output.scores, merged)
records = audit_estimates(merged, p.delta, p.alpha, p.estimators)
log.info("final step: %s", [r for r in records if r["step"] == int(merged.steps[-1])])
write_json(snakemake.output.estimates, {"estimates": records})
