"""Snakemake adapter: Fig 5, final-step epsilon against the number of runs, as PNG, PDF, CSV."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

import pandas as pd

from subaudit.reporting import figures
from subaudit.pipeline import logs
from subaudit.artifacts import read_csv, write_csv
from subaudit.pipeline.score_files import read_scores
from subaudit.reporting.tables import runs_table

log = logs.start(snakemake.log[0])
p = snakemake.params
acc = pd.concat([read_csv(f) for f in snakemake.input.calibrations], ignore_index=True)
final = acc[acc["step"] == acc.groupby("q")["step"].transform("max")]
audits = []
for path in snakemake.input.scores:
    s = read_scores(path)
    audits.append({"q": s.setting["q"], "scenario": s.setting["scenario"],
                   "repeat": s.setting["repeat"], "scores": s.scores[-1], "bits": s.bits})
table = runs_table(final, audits, p.runs, p.delta, p.alpha, p.estimators)
table.insert(0, "experiment", p.experiment)
log.info("table:\n%s", table.to_string())
write_csv(snakemake.output.csv, table)
title = "Effect of the number of runs R on the audits" + (
    f": {p.source} with {p.backbone} features" if p.backbone != "none" else f": {p.source}")
figures.save(figures.epsilon_vs_runs(table, title), snakemake.output.png, snakemake.output.pdf,
             p.paper)
