"""Snakemake adapter: fetch one data source into data/raw/<source>/ and verify its checksum."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from pathlib import Path

from subaudit.pipeline import logs
from subaudit.data import acquire

log = logs.start(snakemake.log[0])
out = Path(snakemake.output[0])
path = acquire(snakemake.params.source, out.parent, checksum=snakemake.params.checksum)
if path.resolve() != out.resolve():
    raise RuntimeError(f"acquire wrote {path}, expected {out}")
log.info("verified %s", path)
