# Phase (on demand, not part of `all`): the cost model's per-unit costs measured on the node
# jobs run on, against the model (subaudit.pipeline.unit_costs). Submit it before the paper's
# jobs: `snakemake --profile slurm --configfile ... -- unit_costs`; its log and
# logs/benchmarks/unit_costs.json give the ratio of this cluster's node to the machine the
# model was measured on.

UNIT_COSTS_BACKBONES = sorted({e["backbone"] for e in EXPERIMENTS.values()} - {"none"})
UNIT_COSTS_DEEP = config["deep"]["source"] is not None
# Opacus' rate is measured at the batch the model's CPU rate was measured at (costs.NETWORK_COSTS)
UNIT_COSTS_NETWORK_BATCH = 32
UNIT_COSTS_NETWORK = config["deep"]["network"] if UNIT_COSTS_DEEP else None


rule unit_costs:
    """Each per-unit cost of the cost model measured here: the engine's, the accountant's, S1's,
    the configuration's backbones', proxy network's and deep network's (Opacus)."""
    output:
        "logs/benchmarks/unit_costs.json",  # a measurement of the machine, beside the jobs' benchmarks
    params:
        backbones=UNIT_COSTS_BACKBONES,
        proxy_network=config["deep"]["metagradient"]["network"]
        if UNIT_COSTS_DEEP and "metagradient" in config["deep"]["kinds"] else None,
        network=UNIT_COSTS_NETWORK,
        network_shape=list(SOURCES[config["deep"]["source"]].shape) if UNIT_COSTS_DEEP else None,
        network_batch=UNIT_COSTS_NETWORK_BATCH,
        device=NAT["device"],
    threads: 1  # each unit on one thread (the proxy's too, whose crafting takes two)
    log:
        "logs/unit_costs.log",
    benchmark:
        "logs/benchmarks/unit_costs.tsv"
    resources:
        **requests(costs.unit_costs_job_resources(UNIT_COSTS_NETWORK, UNIT_COSTS_NETWORK_BATCH)),
        gpu=GPUS,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/unit_costs.py"
