"""Snakemake adapter: one deep-network audit's bounds (subaudit.integrations.deep.audit_rows) as JSON rows."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.artifacts import write_json
from subaudit.integrations.deep import audit_rows, load_audit
from subaudit.pipeline import logs

log = logs.start(snakemake.log[0])
p = snakemake.params
rows = audit_rows(load_audit(snakemake.input[0]), delta=p.delta, alpha=p.alpha, procedures=p.procedures,
                  family=p.family, white_box_families=p.white_box_families, bonferroni=p.bonferroni)
log.info("%d rows", len(rows))
write_json(snakemake.output[0], {"rows": rows})
