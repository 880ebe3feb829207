# Phase: one-run audits of deep networks trained with Opacus (beyond the paper).  The image
# source is split into a private training set, a held-out canary pool, public images and a
# test set; every input canary kind is made once (the metagradient kind optimised through a
# proxy network's non-private training); a network is pretrained on the public images for the
# fine-tuning case; then each audit is one DP training (Opacus, Poisson sampling at
# batch / sizes.train whatever the secret bits) holding every kind's canaries, the input kinds'
# or the white-box ones', or one kind's (deep.trainings), per case, game and repeat.  The figure and the report's table are shaped
# like Table 2 of the canary-optimisation paper.

DEEP = config["deep"]


if DEEP["source"] is not None:  # null: no deep-network audits

    DEEP_SEED = S.seed(config["seed"], "deep", {})
    DEEP_ARCHIVE = S.path("raw", source=DEEP["source"], filename=SOURCES[DEEP["source"]].filename)
    DEEP_INPUT_KINDS = [k for k in DEEP["kinds"] if not DEEP_KINDS[k].white_box]
    # the canaries of a training (deep.trainings): every kind together ("all"), the input kinds
    # ("inputs") apart from the white-box ones, or one kind each
    # per case its games, groups and repeats (a case may choose its own: deep.cases.<case>)
    DEEP_TRAININGS = case_audits(DEEP)
    DEEP_GROUPS = list(dict.fromkeys(group for _, _, group, _ in DEEP_TRAININGS))
    DEEP_AUDIT_RESOURCES = {case: audit_job_resources(DEEP, case, NAT["device"], SOURCES[DEEP["source"]].shape)
                            for case in DEEP["cases"]}   # runtime and memory from the setting
    DEEP_CANARIES_RESOURCES = canaries_job_resources(DEEP, SOURCES[DEEP["source"]].shape, NAT["device"])
    DEEP_PRETRAIN_RESOURCES = pretrain_job_resources(DEEP, NAT["device"], SOURCES[DEEP["source"]].shape)
    # each audit's bounds (deep_bounds) from its training's scores (deep_audit)
    DEEP_BOUNDS = [S.path("deep_bounds", audit=f"{case}_{game}_{group}_{repeat}")
                   for case, game, group, repeat in DEEP_TRAININGS]

    localrules:
        deep_bounds,
        deep_figure,

    rule deep_canaries:
        """Every input canary kind's pairs from the held-out pool (metagradient: optimised)."""
        input:
            DEEP_ARCHIVE,
        output:
            PATHS["deep_canaries"],
        params:
            source=DEEP["source"],
            sizes=DEEP["sizes"],
            canaries=DEEP["canaries"],
            kinds=DEEP_INPUT_KINDS,
            metagradient=DEEP["metagradient"] if "metagradient" in DEEP["kinds"] else None,
            device=NAT["device"],
            seed=DEEP_SEED,
        # On the CPU its optimisation runs CANARY_THREADS (2) torch threads whatever it is given,
        # for its bits (subaudit.integrations.deep). Asking for two cores keeps the deep phase after
        # the natural one: with one core the deep audits ran beside the training shards and both
        # slowed (default run: 1,806 instead of 1,656 job-seconds). Its memory (the host's on the
        # CPU, the GPU's on a GPU) holds the proxy's whole unroll (the paper preset's ResNet-9:
        # about 52 GB).
        threads: 2
        priority: UNLOCKS
        log:
            "logs/deep/canaries.log",
        benchmark:
            "logs/benchmarks/deep/canaries.tsv"
        resources:
            **requests(DEEP_CANARIES_RESOURCES),
            gpu=GPUS,
        conda:
            "../envs/subaudit.yaml"
        script:
            "../scripts/deep_canaries.py"

    rule deep_pretrain:
        """The fine-tuning case's starting point: the network trained without privacy on the
        public images."""
        input:
            DEEP_ARCHIVE,
        output:
            PATHS["deep_pretrained"],
        params:
            source=DEEP["source"],
            sizes=DEEP["sizes"],
            network=DEEP["network"],
            pretrain=DEEP["pretrain"],
            device=NAT["device"],
            seed=DEEP_SEED,
        threads: 1
        priority: UNLOCKS
        log:
            "logs/deep/pretrain.log",
        benchmark:
            "logs/benchmarks/deep/pretrain.tsv"
        resources:
            **requests(DEEP_PRETRAIN_RESOURCES),
            gpu=GPUS,
        conda:
            "../envs/subaudit.yaml"
        script:
            "../scripts/deep_pretrain.py"

    rule deep_audit:
        """One one-run audit: a DP training with Opacus holding the canaries of its group (every
        kind, or one); their scores, secret bits and the training's history (bounds: deep_figure)."""
        input:
            archive=DEEP_ARCHIVE,
            canaries=rules.deep_canaries.output[0],
            pretrained=lambda wc: rules.deep_pretrain.output if wc.case == "finetune" else [],
        output:
            S.path("deep_audit", audit="{case}_{game}_{group}_{repeat}"),
        wildcard_constraints:
            case=one_of(DEEP["cases"]),
            game=one_of(DEEP["games"]),
            group=one_of(DEEP_GROUPS),
            repeat=r"\d+",
        params:
            source=DEEP["source"],
            sizes=DEEP["sizes"],
            network=DEEP["network"],
            training=lambda wc: case_training(DEEP, wc.case),
            physical_batch=DEEP["physical_batch"],
            precision=DEEP["precision"],
            kinds=lambda wc: deep_group(wc)[0],
            gradient_canaries=lambda wc: case_setting(DEEP, wc.case)["gradient_canaries"] if deep_group(wc)[1] else 0,
            gradient_width=lambda wc: DEEP["gradient_width"] if wc.game == "substitute" and deep_group(wc)[1] else 1,
            gradient_scores=lambda wc: case_setting(DEEP, wc.case)["gradient_scores"] if deep_group(wc)[1] else [],
            scores=DEEP["scores"],
            device=NAT["device"],
            seed=DEEP_SEED,
        threads: 1
        log:
            "logs/deep/audit_{case}_{game}_{group}_{repeat}.log",
        benchmark:
            "logs/benchmarks/deep/audit_{case}_{game}_{group}_{repeat}.tsv"
        resources:
            **requests(lambda wc: DEEP_AUDIT_RESOURCES[wc.case]),
            gpu=GPUS,
        conda:
            "../envs/subaudit.yaml"
        script:
            "../scripts/deep_audit.py"

    rule deep_bounds:
        """One audit's bounds by each procedure beside the accountant's epsilon of its training:
        computed as soon as its training ends (the DP-SGD curve's search takes seconds), so the
        figure only draws."""
        input:
            PATHS["deep_audit"],
        output:
            PATHS["deep_bounds"],
        params:
            procedures=DEEP["procedures"],
            family=DEEP["family"],
            white_box_families=DEEP["white_box_families"],
            bonferroni=DEEP["bonferroni"],
            delta=config["delta"],
            alpha=config["alpha"],
        log:
            "logs/deep/bounds_{audit}.log",
        benchmark:
            "logs/benchmarks/deep/bounds_{audit}.tsv"
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../envs/subaudit.yaml"
        script:
            "../scripts/deep_bounds.py"

    rule deep_figure:
        """Every audit's bounds, drawn like Table 2 of the canary-optimisation paper."""
        input:
            DEEP_BOUNDS,
        output:
            **figure_files(),
        wildcard_constraints:
            name=figs("deep-one-run"),
        params:
            source=DEEP["source"],
            network=DEEP["network"],
            score=DEEP["scores"][0],
        log:
            FIGURE_LOG,
        benchmark:
            FIGURE_BENCHMARK
        resources:
            **FIGURE_RESOURCES,
        conda:
            "../envs/subaudit.yaml"
        script:
            "../scripts/deep_figure.py"
