"""Snakemake adapter: empirical epsilon of one audit's score file at every recorded step."""

from subaudit import logs
from subaudit.scores import read_scores
from subaudit.io import write_json
from subaudit.tables import step_estimates

log = logs.to_file(snakemake.log[0])
p = snakemake.params
scores = read_scores(snakemake.input[0])
records = step_estimates(scores.scores, scores.bits, scores.steps, p.delta, p.alpha,
                         p.estimators, p.seed)
for rec in records:
    rec.update(scores.setting, sigma=scores.sigma)
log.info("final step: %s", [r for r in records if r["step"] == int(scores.steps[-1])])
write_json(snakemake.output[0], {"estimates": records})
