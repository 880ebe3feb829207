"""Snakemake adapter: empirical epsilon at every recorded step of S1 score files."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.pipeline import logs
from subaudit.artifacts import write_json
from subaudit.pipeline.score_files import audit_estimates, read_scores

log = logs.start(snakemake.log[0])
p = snakemake.params
for path, out in zip(snakemake.input, snakemake.output):
    records = audit_estimates(read_scores(path), p.delta, p.alpha, p.estimators)
    log.info("%s final step: %s", path, [r for r in records if r["step"] == records[-1]["step"]])
    write_json(out, {"estimates": records})
