# Phase: natural-data audits S2-S5: reference model and target, canaries, calibration,
# sharded DP training, merging and step-wise estimation; utility runs for Fig A1.


# Joining shards and estimating epsilon take seconds: run where the workflow was started.
localrules:
    merge_scores,
    estimate_natural,


rule reference:
    """Non-DP full-batch training on D; the target z is its least confident record."""
    input:
        "data/features/{exp}.npz",
    output:
        params="results/natural/{exp}/reference.npz",
        info="results/natural/{exp}/reference.json",
    params:
        hidden=lambda wc: EXPERIMENTS[wc.exp]["hidden"],
        optimizer=lambda wc: EXPERIMENTS[wc.exp]["optimizer"],
        init=lambda wc: EXPERIMENTS[wc.exp]["init"],
        lr=lambda wc: EXPERIMENTS[wc.exp]["lr"],
        steps=lambda wc: EXPERIMENTS[wc.exp]["steps"],
        every=lambda wc: EXPERIMENTS[wc.exp]["every"],
        seed=lambda wc: nat_seed(wc.exp, "reference"),
    log:
        "logs/natural/{exp}/reference.log",
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/reference.py"


rule craft_gradient:
    """S2 (Algorithm 2): least-updated coordinate in noiseless training at this q."""
    input:
        "data/features/{exp}.npz",
    output:
        canary="results/natural/{exp}/canaries/S2_q{q}.npz",
        info="results/natural/{exp}/canaries/S2_q{q}.json",
    params:
        hidden=lambda wc: EXPERIMENTS[wc.exp]["hidden"],
        optimizer=lambda wc: EXPERIMENTS[wc.exp]["optimizer"],
        init=lambda wc: EXPERIMENTS[wc.exp]["init"],
        lr=lambda wc: EXPERIMENTS[wc.exp]["lr"],
        steps=lambda wc: EXPERIMENTS[wc.exp]["steps"],
        clip=lambda wc: EXPERIMENTS[wc.exp]["clip"],
        q=lambda wc: float(wc.q),
        seed=lambda wc: nat_seed(wc.exp, "S2", wc.q),
    log:
        "logs/natural/{exp}/craft_S2_q{q}.log",
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/craft_gradient.py"


rule craft_input:
    """S3 / S4 / S5 (Algorithms 3-5) from the reference model's final parameters."""
    input:
        features="data/features/{exp}.npz",
        reference="results/natural/{exp}/reference.npz",
        info="results/natural/{exp}/reference.json",
    output:
        canary="results/natural/{exp}/canaries/{scenario}.npz",
        info="results/natural/{exp}/canaries/{scenario}.json",
    wildcard_constraints:
        scenario="S3|S4|S5",
    params:
        hidden=lambda wc: EXPERIMENTS[wc.exp]["hidden"],
        craft_steps=NAT["craft_steps"],
        craft_lr=NAT["craft_lr"],
    log:
        "logs/natural/{exp}/craft_{scenario}.log",
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/craft_input.py"


rule calibrate_natural:
    """Sigma reaching the target eps_S at (q, T), and eps_S, eps_AR at every checkpoint."""
    output:
        "results/natural/{exp}/accounting/q{q}.csv",
    params:
        target_epsilon=NAT["target_epsilon"],
        steps=lambda wc: EXPERIMENTS[wc.exp]["steps"],
        checkpoints=lambda wc: nat_checkpoints(wc.exp),
        q=lambda wc: float(wc.q),
        delta=config["delta"],
    log:
        "logs/natural/{exp}/calibrate_q{q}.log",
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../scripts/calibrate_natural.py"


rule train_shard:
    """DP training of runs [lo, hi) of one audit setting; scores at every checkpoint."""
    input:
        features="data/features/{exp}.npz",
        target="results/natural/{exp}/reference.json",
        canary=canary_file,
        accounting="results/natural/{exp}/accounting/q{q}.csv",
    output:
        "results/natural/{exp}/shards/{scenario}_q{q}_rep{rep}/runs{lo}-{hi}.npz",
    params:
        hidden=lambda wc: EXPERIMENTS[wc.exp]["hidden"],
        optimizer=lambda wc: EXPERIMENTS[wc.exp]["optimizer"],
        init=lambda wc: EXPERIMENTS[wc.exp]["init"],
        clip=lambda wc: EXPERIMENTS[wc.exp]["clip"],
        lr=lambda wc: EXPERIMENTS[wc.exp]["lr"],
        steps=lambda wc: EXPERIMENTS[wc.exp]["steps"],
        every=lambda wc: EXPERIMENTS[wc.exp]["every"],
        q=lambda wc: float(wc.q),
        memory_mb=NAT["memory_mb"],
        device=NAT["device"],
        seed=lambda wc: nat_seed(wc.exp, wc.scenario, wc.q, int(wc.rep)),
        lo=lambda wc: int(wc.lo),
        hi=lambda wc: int(wc.hi),
    log:
        "logs/natural/{exp}/train_{scenario}_q{q}_rep{rep}_runs{lo}-{hi}.log",
    resources:
        mem_mb=lambda wc: int(NAT["memory_mb"]) + 2000,
        runtime=240,
        gpu=GPUS,
    script:
        "../scripts/train_shard.py"


rule merge_scores:
    """All shards of one audit setting, sorted by run (checked complete)."""
    input:
        lambda wc: [
            f"results/natural/{wc.exp}/shards/{wc.scenario}_q{wc.q}_rep{wc.rep}/runs{lo}-{hi}.npz"
            for lo, hi in nat_shards()
        ],
    output:
        "results/natural/{exp}/scores/{scenario}_q{q}_rep{rep}.npz",
    params:
        runs=NAT["runs"],
    log:
        "logs/natural/{exp}/merge_{scenario}_q{q}_rep{rep}.log",
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/merge_scores.py"


rule estimate_natural:
    """Empirical epsilon at every checkpoint, per estimator."""
    input:
        "results/natural/{exp}/scores/{scenario}_q{q}_rep{rep}.npz",
    output:
        "results/natural/{exp}/estimates/{scenario}_q{q}_rep{rep}.json",
    params:
        delta=config["delta"],
        alpha=config["alpha"],
        estimators=config["estimators"],
        seed=lambda wc: nat_seed(wc.exp, wc.scenario, wc.q, int(wc.rep), "split"),
    log:
        "logs/natural/{exp}/estimate_{scenario}_q{q}_rep{rep}.log",
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/estimate_natural.py"


rule utility:
    """Fig A1 runs: test accuracy over training with the target z vs with the canary z'."""
    input:
        features="data/features/{exp}.npz",
        target="results/natural/{exp}/reference.json",
        canary=lambda wc: canary_file(
            Namespace(exp=wc.exp, scenario=wc.scenario, q=nat_qs(wc.exp)[0])),
        accounting=lambda wc: f"results/natural/{wc.exp}/accounting/q{nat_qs(wc.exp)[0]}.csv",
    output:
        "results/natural/{exp}/utility/{scenario}.csv",
    params:
        hidden=lambda wc: EXPERIMENTS[wc.exp]["hidden"],
        optimizer=lambda wc: EXPERIMENTS[wc.exp]["optimizer"],
        init=lambda wc: EXPERIMENTS[wc.exp]["init"],
        clip=lambda wc: EXPERIMENTS[wc.exp]["clip"],
        lr=lambda wc: EXPERIMENTS[wc.exp]["lr"],
        steps=lambda wc: EXPERIMENTS[wc.exp]["steps"],
        every=lambda wc: EXPERIMENTS[wc.exp]["every"],
        q=lambda wc: float(nat_qs(wc.exp)[0]),
        runs=2 * NAT["utility_runs"],
        memory_mb=NAT["memory_mb"],
        device=NAT["device"],
        seed=lambda wc: nat_seed(wc.exp, wc.scenario, "utility"),
    log:
        "logs/natural/{exp}/utility_{scenario}.log",
    resources:
        mem_mb=lambda wc: int(NAT["memory_mb"]) + 2000,
        runtime=60,
        gpu=GPUS,
    script:
        "../scripts/utility.py"
