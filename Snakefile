# subaudit workflow: sets config, validates it, includes one rule file per phase.
# Parameters: params.yaml (shared with DVC). Paper settings: --configfile presets/paper.yaml

from pathlib import Path

from subaudit.devices import NUMERICS_ENV, machine_independent_numerics
from subaudit.pipeline.config import selected, validate_params

configfile: "params.yaml"

# The same bits on every x86-64 processor (subaudit.devices.NUMERICS_ENV): set before any job
# starts, in every process (a cluster job's own Snakemake parses this file too), so the warm
# worker, the scripts and the cluster's jobs all inherit it.
_replaced = machine_independent_numerics()
if _replaced and workflow.is_main_process:
    import sys as _sys

    print(f"subaudit: this workflow computes under {NUMERICS_ENV} (not {_replaced}): the same numbers on "
          "every x86-64 processor", file=_sys.stderr)

# Before any job, naming the key. A cluster job's own Snakemake (--mode remote) reads the
# configuration the main process validated: it skips the check (the deep phase's canary
# counts are checked by computing one-run bounds with SciPy, 1.4 s, for settings beyond the
# shipped ones, whose counts subaudit.estimation.procedures.LEAST_CANARIES holds).
if workflow.is_main_process:
    validate_params(config, source="params.yaml (merged with any --configfile)")
# Only the experiments and cases the selection lists name (natural.run_experiments,
# deep.run_cases) exist for the rules, in every process.
config.update(selected(config))

# A second run in a busy folder: Snakemake checks for incomplete outputs (the other run's jobs
# in progress) before its lock, so it first suggests --rerun-incomplete, which would recompute
# them under the running jobs. Where a lock and jobs in progress are recorded, say so first.
if workflow.is_main_process and any(Path(".snakemake/locks").glob("*.lock")) and any(
        Path(".snakemake/incomplete").iterdir() if Path(".snakemake/incomplete").is_dir() else ()):
    import sys as _sys

    print("Another Snakemake run holds this folder's lock (.snakemake/locks) and has jobs in progress: "
          "if Snakemake reports incomplete files below, they are that run's; wait for it to finish rather "
          "than --rerun-incomplete. If no run is active (one was killed), `snakemake --unlock`, then rerun "
          "with --rerun-incomplete.", file=_sys.stderr)

# Snakemake 9's default job rate limit (100 jobs per 1 s) re-arms a 1 s timer after every pass
# of its scheduler, and every finished job starts another pass, so the timers pile up: after N
# jobs the scheduler makes N full passes a second (the default run: 181 timer threads and
# 7 min 15 s of the scheduler's CPU, most of a core by the end; 46 s with the timers asleep).
# This workflow needs no submission rate limit: its scheduler drops Snakemake's default one
# before it starts; a limit asked for on the command line or in a profile (another value) stays.
#
# A run with many local jobs starts the warm worker (subaudit.pipeline.warm): one process that
# imports what the scripts import, once, and forks a child per job, so that no job imports torch
# again (1.3-3.6 s each, about a fifth of the default run); the numbers are the same. Under
# SLURM its local rules (estimates, figures, the report) use it; its cluster jobs never do.
# SUBAUDIT_WARM_WORKER=0 turns it off.
from subaudit.pipeline import warm as _warm

_WORKER = []


onstart:
    _limit = workflow.scheduling_settings.max_jobs_per_timespan
    if _limit is not None and (_limit.max_jobs, _limit.timespan) == (100, 1):
        workflow.scheduler.job_rate_limiter = None
    # --touch runs no job: no worker to load
    if workflow.is_main_process and not workflow.touch and _warm.enabled(sum(1 for _ in workflow.dag.local_needrun_jobs)):
        _WORKER.append(_warm.start(_warm.script_imports(Path(workflow.basedir) / "workflow" / "scripts"),
                                   log="logs/warm-worker.log"))


onsuccess:
    for _w in _WORKER:
        _w.stop()


onerror:
    for _w in _WORKER:
        _w.stop()

include: "workflow/rules/common.smk"
include: "workflow/rules/accounting.smk"
include: "workflow/rules/s1.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/natural.smk"
include: "workflow/rules/one_run.smk"
include: "workflow/rules/deep.smk"
include: "workflow/rules/reconstruction.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/unit_costs.smk"


localrules:
    all,


rule all:
    default_target: True
    input:
        FIGURES,
        REPORT,
        VARIATION_ESTIMATES,
