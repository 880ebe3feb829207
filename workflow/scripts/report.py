"""Snakemake adapter: the run's report (Markdown, HTML, metrics JSON) from the figures' CSVs."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from pathlib import Path

from subaudit.pipeline import logs
from subaudit.artifacts import read_csv, write_json, write_text
from subaudit.data.acquisition import file_digest
from subaudit.reporting.report import FigureInfo, build, to_html, to_markdown

log = logs.start(snakemake.log[0])
p = snakemake.params
tables = {Path(f).stem: read_csv(f) for f in snakemake.input if f.endswith(".csv")}
report = build(tables, [FigureInfo(**f) for f in p.figures], estimator=p.estimator,
               natural=p.natural, ablations=p.ablations, base=p.base, runs=p.runs, delta=p.delta,
               alpha=p.alpha, settings=p.settings)
for name, claim in report.metrics["claims"].items():
    log.info("claim %s: %s", name, claim["verdict"])
write_text(snakemake.output.md, to_markdown(report))
write_text(snakemake.output.html, to_html(report))
# the figure CSVs judged, by digest: report.json (in dvc.lock) pins them, and so reference/ in git
csvs = {Path(f).name: file_digest(f) for f in snakemake.input if f.endswith(".csv")}
write_json(snakemake.output.json, {**report.metrics, "figure_csvs": csvs})
