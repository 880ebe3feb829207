"""Snakemake adapter: empirical epsilon of one natural-data audit at every checkpoint."""

from subaudit import logs
from subaudit.io import read_npz, write_json
from subaudit.tables import step_estimates

log = logs.to_file(snakemake.log[0])
p, wc = snakemake.params, snakemake.wildcards
data = read_npz(snakemake.input[0])
records = step_estimates(data["scores"], data["bits"], data["steps"], p.delta, p.alpha,
                         p.estimators, p.seed)
for rec in records:
    rec.update(experiment=wc.exp, scenario=wc.scenario, q=float(wc.q), repeat=int(wc.rep),
               sigma=float(data["sigma"]))
log.info("final step: %s", [r for r in records if r["step"] == int(data["steps"][-1])])
write_json(snakemake.output[0], {"estimates": records})
