"""Snakemake adapter: empirical epsilon of one S1 repeat at every recorded step."""

from subaudit import logs
from subaudit.io import read_npz, write_json
from subaudit.tables import step_estimates

log = logs.to_file(snakemake.log[0])
p, wc = snakemake.params, snakemake.wildcards
data = read_npz(snakemake.input[0])
records = step_estimates(data["scores"], data["labels"], data["steps"], p.delta, p.alpha,
                       p.estimators, p.seed)
for rec in records:
    rec.update(q=float(data["q"]), sigma=float(data["sigma"]),
               target_epsilon=float(wc.eps), repeat=int(wc.rep))
    log.info("%s", rec)
write_json(snakemake.output[0], {"estimates": records})
