"""Snakemake adapter: the cost model's per-unit costs measured on the node this job runs on."""

from subaudit.pipeline import warm

warm.hand_over()  # in the warm worker's child when one takes the job (subaudit.pipeline.warm)

from subaudit.artifacts import write_json
from subaudit.devices import resolve_device, use_threads
from subaudit.pipeline import logs, unit_costs

log = logs.start(snakemake.log[0])
use_threads(snakemake.threads)
p = snakemake.params
device = str(resolve_device(p.device))
units = unit_costs.measure(p.backbones, p.proxy_network, "cpu" if device == "cpu" else "cuda",
                           progress=lambda what: log.info("measured %s", what))
if p.network is not None:
    from subaudit.integrations.deep import training_rate

    shape = tuple(p.network_shape)          # (H, W) or (H, W, C), as the deep phase's source gives it
    rate = training_rate(p.network, classes=10, channels=shape[2] if len(shape) == 3 else 1, side=shape[0],
                         batch=p.network_batch, steps=1, device=device, clock=unit_costs.clock(device))
    units.append(unit_costs.network(p.network, shape, p.network_batch, rate, device))
log.info("per-unit costs on this node against the cost model (ratio: measured / modelled):\n%s",
         unit_costs.table(units))
write_json(snakemake.output[0], {"device": device, "agreement": list(unit_costs.AGREEMENT),
                                 "clock": unit_costs.clock(device).__name__,   # process_time on the CPU
                                 "units": [u.to_dict() for u in units]})
