"""The workflow's vocabulary: what the Snakemake workflow (``Snakefile``,
``workflow/rules/*.smk``, ``workflow/scripts/*.py``) needs from the library, and nothing the
library itself needs.

* :mod:`~subaudit.pipeline.settings`: an audit setting's knobs, which artifact depends on
  which knobs (its path key), paths, seeds and the reproduction switches;
* :mod:`~subaudit.pipeline.config`: ``params.yaml`` validated against
  ``params.schema.yaml`` and the registries before any job starts;
* :mod:`~subaudit.pipeline.job_inputs`: the files a training or crafting job reads
  (features, model, canary, setting);
* :mod:`~subaudit.pipeline.score_files`: score files (every audit's one artifact type), run
  bits, shards and merging;
* :mod:`~subaudit.pipeline.logs`: one log file per job;
* :mod:`~subaudit.pipeline.prefetch`: every archive and weight a configuration downloads,
  fetched once where there is internet (``subaudit prefetch``);
* :mod:`~subaudit.pipeline.costs`: what every computing job costs (measured per-unit costs by
  device kind: the engine's trainings, features, crafting, S1, accounting, the deep phase's
  networks), for their requests;
* :mod:`~subaudit.pipeline.plan`: what a configuration submits and reserves, from
  Snakemake's dry run (``subaudit plan``);
* :mod:`~subaudit.pipeline.warm`: the warm worker, which runs a local workflow's jobs in
  children forked from one process that imported torch once (each script hands over first).

Importing :mod:`settings`, :mod:`config` and :mod:`costs` loads no torch: the workflow imports
them while Snakemake parses, once per cluster job.  Submodules are imported by name.

May import: every package below it (:mod:`subaudit.scenarios`, :mod:`subaudit.engine`,
:mod:`subaudit.estimation`, :mod:`subaudit.accounting`, :mod:`subaudit.data`) and the base
modules; nothing imports it but the workflow, the command line and the tests.
"""
