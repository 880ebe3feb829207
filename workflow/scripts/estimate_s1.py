"""Snakemake adapter: empirical epsilon at every recorded step of S1 score files."""

from subaudit.pipeline import logs
from subaudit.artifacts import write_json
from subaudit.pipeline.score_files import read_scores
from subaudit.reporting.tables import step_estimates

log = logs.to_file(snakemake.log[0])
p = snakemake.params
for path, out in zip(snakemake.input, snakemake.output):
    scores = read_scores(path)
    records = step_estimates(scores.scores, scores.bits, scores.steps, p.delta, p.alpha, p.estimators)
    for rec in records:
        rec.update(scores.setting, sigma=scores.sigma)
    log.info("%s final step: %s", path, [r for r in records if r["step"] == int(scores.steps[-1])])
    write_json(out, {"estimates": records})
