# Phase: natural-data audits: reference model and target, canaries (one rule, dispatched through
# the scenario registry), sharded DP training, merging and estimation; utility runs for Fig A1.
# Every path carries exactly the knobs its artifact depends on (subaudit.pipeline.settings).


# Joining shards and estimating take seconds: run where the workflow was started.
localrules:
    estimate_natural,


rule reference:
    """Non-DP training on D (full batch, or Poisson-sampled at q with natural.reference
    per-q); the target z is its least confident record."""
    input:
        PATHS["features"],
    output:
        params=PATHS["reference"],
        info=PATHS["target"],
    params:
        **knobs("hidden", "optimizer", "init", "lr", "steps", "every"),
        q=lambda wc: values(wc).get("q", 1.0),  # natural.reference per-q: the audit's q
        seed=seed("reference"),
    log:
        "logs/natural/{exp}/reference_{key}.log",
    benchmark:
        "logs/benchmarks/natural/{exp}/reference_{key}.tsv"
    priority: UNLOCKS
    resources:
        **requests(reference_request),
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/reference.py"


rule craft:
    """A scenario's canary pair (the paper's Algorithms 2-5 and beyond), through the scenario registry."""
    input:
        unpack(craft_inputs),
    output:
        canary=PATHS["canary"],
        info=PATHS["canary_info"],
    params:
        **knobs("hidden", "optimizer", "init"),
        knobs=lambda wc: S.parse_key(wc.key, S.canary_knobs(SCENARIOS[wc.scenario], REF)),
        options=lambda wc: crafting_options(wc.exp, wc.scenario),
        canary_q=lambda wc: canary_rate(wc) if SCENARIOS[wc.scenario].noisy else None,
        seed=seed("canary"),
    log:
        "logs/natural/{exp}/craft_{scenario}_{key}.log",
    benchmark:
        "logs/benchmarks/natural/{exp}/craft_{scenario}_{key}.tsv"
    priority: UNLOCKS
    resources:
        **requests(craft_request),
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/craft.py"


rule train_target:
    """DP training of the runs with the target z (even indices in [lo, hi)) of one setting, once
    for every scenario sharing that world (S3-S6), scored at every checkpoint for each one's pair."""
    input:
        unpack(target_inputs),
    output:
        PATHS["target_shard"],
    params:
        scenarios=lambda wc: list(target_group(wc)),
        **knobs(*TRAINING_KNOBS),
        canary_q=canary_rate,
        memory_mb=NAT["memory_mb"],
        device=NAT["device"],
        seed=seed("target-world"),
        lo=lambda wc: int(wc.lo),
        hi=lambda wc: int(wc.hi),
    threads: 1
    log:
        "logs/natural/{exp}/train_target_{key}_runs{lo}-{hi}.log",
    benchmark:
        "logs/benchmarks/natural/{exp}/train_target_{key}_runs{lo}-{hi}.tsv"
    resources:
        **requests(training_request(target_runs)),
        gpu=GPUS,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/train_target.py"


rule train_shard:
    """DP training of runs [lo, hi) of one audit setting (only those with z' where its runs with
    the target are trained once for several scenarios: train_target); scores at every checkpoint."""
    input:
        unpack(training_inputs),
    output:
        PATHS["shard"],
    params:
        **knobs(*TRAINING_KNOBS),
        canary_q=canary_rate,
        memory_mb=NAT["memory_mb"],
        device=NAT["device"],
        seed=seed("train"),
        lo=lambda wc: int(wc.lo),
        hi=lambda wc: int(wc.hi),
        substitute_only=lambda wc: wc.scenario in target_group(wc),
    threads: 1  # one core per job: on 2 cores two such jobs did 1.1-1.3x one two-thread job
    log:
        "logs/natural/{exp}/train_{scenario}_{key}_runs{lo}-{hi}.log",
    benchmark:
        "logs/benchmarks/natural/{exp}/train_{scenario}_{key}_runs{lo}-{hi}.tsv"
    resources:
        **requests(training_request(shard_runs, span=lambda wc: SCENARIOS[wc.scenario].span)),
        gpu=GPUS,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/train_shard.py"


rule estimate_natural:
    """All shards of one audit setting (with its runs of the target's shared world, if any),
    sorted by run (checked complete), and the empirical lower bounds on epsilon at every
    recorded step, per estimator."""
    input:
        shards=lambda wc: [artifact("shard", wc, lo=lo, hi=hi) for lo, hi in nat_shards(values(wc)["runs"])],
        targets=target_shards,
    output:
        scores=PATHS["scores"],
        estimates=PATHS["estimates"],
    params:
        runs=knob("runs"),
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
    log:
        "logs/natural/{exp}/estimate_{scenario}_{key}.log",
    benchmark:
        "logs/benchmarks/natural/{exp}/estimate_{scenario}_{key}.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/estimate_natural.py"


rule utility:
    """Fig A1 runs: test accuracy over training with the target z vs with the canary z'."""
    input:
        unpack(training_inputs),
    output:
        PATHS["utility"],
    params:
        **knobs(*TRAINING_KNOBS),
        canary_q=canary_rate,
        runs=2 * NAT["utility_runs"],
        memory_mb=NAT["memory_mb"],
        device=NAT["device"],
        seed=seed("utility"),
    log:
        "logs/natural/{exp}/utility_{scenario}_{key}.log",
    benchmark:
        "logs/benchmarks/natural/{exp}/utility_{scenario}_{key}.tsv"
    resources:
        **requests(training_request(lambda wc: 2 * NAT["utility_runs"], span=lambda wc: False)),  # test accuracy: in full
        gpu=GPUS,
    conda:
        "../envs/subaudit.yaml"
    script:
        "../scripts/utility.py"
