"""Snakemake adapter: data-trap reconstruction on an image experiment's split, figure and tables."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.reporting import figures
from subaudit.pipeline import logs
from subaudit.scenarios import reconstruction
from subaudit.data import load_split
from subaudit.artifacts import write_csv, write_json

log = logs.start(snakemake.log[0])
p = snakemake.params
train, aux, test = load_split(snakemake.input.split)
pixels = [d.x.reshape(len(d.x), -1) / 255.0 for d in (train, aux, test)]
result = reconstruction.run_traps(pixels[0], train.y, pixels[1], pixels[2], classes=train.classes,
                                  traps=p.traps, fire_rate=p.fire_rate, lr=p.lr, batch=p.batch,
                                  epochs=p.epochs, seed=p.seed)
table = reconstruction.outcome_table(result)
log.info("outcomes:\n%s", table.to_string())
write_csv(snakemake.output.csv, table)
write_csv(snakemake.output.units, reconstruction.unit_table(result))
write_json(snakemake.output.summary, {"counts": result.counts, "predicted": result.predicted,
                                      "predicted_held_out": result.predicted_held_out,
                                      "images": len(train.x), "traps": p.traps, "fire_rate": p.fire_rate,
                                      "psnr_recovered_db": reconstruction.PSNR_RECOVERED})
fig = figures.reconstruction(
    table, reconstruction.shown_pairs(result, pixels[0], p.show),
    f"Data traps: {p.traps} trap units, {len(train.x)} {p.source} training images, plain SGD",
    shape=train.x.shape[1:])
figures.save(fig, snakemake.output.png, snakemake.output.pdf)
