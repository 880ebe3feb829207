"""Snakemake adapter: merge the shards of one audit setting (complete, sorted by run)."""

from subaudit import logs
from subaudit.scores import merge_shards, read_scores, write_scores
from subaudit.settings import parse_key

log = logs.to_file(snakemake.log[0])
wc = snakemake.wildcards
parts = [read_scores(f) for f in snakemake.input]
setting = {"experiment": wc.exp, "scenario": wc.scenario, **parse_key(wc.key)}
merged = merge_shards(parts, snakemake.params.runs, setting)
log.info("merged %d shards, %d runs", len(parts), len(merged.runs))
write_scores(snakemake.output[0], merged)
