# Phase: data-trap reconstruction (beyond the paper).  An MLP whose first layer is made of
# trap units is fine-tuned with plain SGD on an image experiment's training images, which
# are then read back from the trap units' weight change; the figure counts the traps that
# captured one image, several or none against the construction's prediction.

REC = config["reconstruction"]


if REC["experiment"] is not None:  # null: no reconstruction

    # Seconds of work: run where the workflow was started.
    localrules:
        reconstruction,

    rule reconstruction:
        """Build the traps from the auxiliary images, fine-tune on the training images, recover."""
        input:
            split=S.path("split", exp=REC["experiment"]),
        output:
            **figure_files(),
            units=PATHS["reconstruction_units"],
            summary=PATHS["reconstruction_summary"],
        wildcard_constraints:
            name=figs("reconstruction"),
        params:
            traps=REC["traps"],
            fire_rate=REC["fire_rate"],
            lr=REC["lr"],
            batch=REC["batch"],
            epochs=REC["epochs"],
            show=REC["show"],
            source=EXPERIMENTS[REC["experiment"]]["source"],
            seed=S.seed(config["seed"], "reconstruction", {"experiment": REC["experiment"]}),
        log:
            "logs/reconstruction/{name}.log",
        benchmark:
            "logs/benchmarks/reconstruction/{name}.tsv"
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../envs/subaudit.yaml"
        script:
            "../scripts/reconstruction.py"
