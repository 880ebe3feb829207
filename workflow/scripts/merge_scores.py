"""Snakemake adapter: merge the shards of one audit setting (complete, sorted by run)."""

from subaudit import logs
from subaudit.audit import merge_shards
from subaudit.io import read_npz, write_npz

log = logs.to_file(snakemake.log[0])
parts = [read_npz(f) for f in snakemake.input]
merged = merge_shards(parts, snakemake.params.runs)
log.info("merged %d shards, %d runs", len(parts), len(merged["runs"]))
write_npz(snakemake.output[0], sigma=parts[0]["sigma"], **merged)
