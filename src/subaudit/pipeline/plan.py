"""What a configuration costs before it is submitted (``subaudit plan``).

:func:`planned_jobs` asks Snakemake itself (a dry run of the whole workflow, ``--forceall``)
for every job a configuration makes and what each requests (``threads``, ``mem_mb``,
``runtime``, ``gpu``): the requests come from the rules' resources, which the cost models
give (:mod:`subaudit.pipeline.costs`; each job also publishes its modelled seconds, without
margin, as an ``expected_s`` resource); ``split`` asks for a fixed amount.
:func:`plan` sums them per rule: job count, the largest request, the hours the cluster reserves
(CPU-hours, threads x runtime, of the CPU jobs; GPU-hours of the GPU jobs, ``natural.device``
cuda or auto: upper bounds, since a runtime request carries a margin) and the hours the cost
models expect. Local rules (downloads, estimates, figures) run where
Snakemake runs and reserve nothing.

The library never reads Snakemake state; this module runs Snakemake's command line, as a user
would, from the workflow's folder.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Job", "RulePlan", "format_plan", "local_rules", "parse_dry_run", "plan", "planned_jobs", "totals"]

_BLOCK = re.compile(r"\n(?=(?:local)?rule \w+:)")
_HEAD = re.compile(r"(local)?rule (\w+):")


@dataclass(frozen=True)
class Job:
    """One job of a dry run: its rule, whether it runs locally, its requests, and the log and
    benchmark files it writes (None: none)."""

    rule: str
    local: bool
    threads: int
    mem_mb: int
    runtime: int
    gpu: int
    expected_s: int | None = None
    out_kb: int | None = None
    log: str | None = None
    benchmark: str | None = None


@dataclass(frozen=True)
class RulePlan:
    """One rule's jobs summed: how many, the largest request of each kind, the hours the cluster
    reserves for them (0 for a local rule), the hours its cost model expects and the megabytes
    its jobs write (None where the rule has no model)."""

    rule: str
    jobs: int
    local: bool
    threads: int
    mem_mb: int
    runtime: int
    gpu: int
    cpu_hours: float
    gpu_hours: float
    expected_hours: float | None = None
    out_mb: float | None = None


def local_rules(root: str | Path) -> set[str]:
    """The rules the workflow in ``root`` declares ``localrules:`` (its Snakefile and rule
    files): a dry run does not mark them."""
    names: set[str] = set()
    root = Path(root)
    for path in [root / "Snakefile", *sorted((root / "workflow" / "rules").glob("*.smk"))]:
        # also inside a rule file's `if` (a phase that can be switched off)
        for block in re.findall(r"^[ \t]*localrules:\s*\n((?:[ \t]+\w+,?[ \t]*\n)+)", path.read_text(), flags=re.M):
            names.update(re.findall(r"\w+", block))
    return names


def _job(block: str, local: set[str]) -> Job | None:
    """The job a dry run's block describes (None for the target rule ``all``)."""
    head = _HEAD.match(block)
    if head is None or head.group(2) == "all":
        return None
    fields = dict(re.findall(r"^\s+(\w+): (.*)$", block, flags=re.M))
    resources = dict(kv.split("=", 1) for kv in fields.get("resources", "").split(", ") if "=" in kv)
    missing = {"mem_mb", "runtime"} - resources.keys()
    if missing:
        raise ValueError(f"rule {head.group(2)} requests no {' and no '.join(sorted(missing))}: every rule must")
    return Job(rule=head.group(2), local=head.group(1) is not None or head.group(2) in local,
               threads=int(fields.get("threads", 1)), mem_mb=int(resources["mem_mb"]),
               runtime=int(resources["runtime"]), gpu=int(resources.get("gpu", 0)),
               expected_s=int(resources["expected_s"]) if "expected_s" in resources else None,
               out_kb=int(resources["out_kb"]) if "out_kb" in resources else None,
               log=fields.get("log"), benchmark=fields.get("benchmark"))


def parse_dry_run(text: str, local: set[str] = frozenset()) -> list[Job]:
    """Every job of a ``snakemake --dry-run`` output (its per-job blocks); ``local``: the rules
    that run where Snakemake runs."""
    return [job for block in _BLOCK.split("\n" + text) if (job := _job(block.strip("\n"), local)) is not None]


def planned_jobs(root: str | Path, configfiles: Sequence[str | Path] = ()) -> list[Job]:
    """Every job of the workflow in ``root`` (its ``params.yaml`` with ``configfiles`` merged
    over it, as ``snakemake --configfile`` merges them), from Snakemake's dry run."""
    command = [str(Path(sys.executable).parent / "snakemake"), "--dry-run", "--forceall", "--nolock"]
    if configfiles:
        command += ["--configfile", *map(str, configfiles)]
    proc = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        raise RuntimeError(f"snakemake --dry-run failed in {root}: {lines[-1] if lines else 'no output'} "
                           "(run it there for the whole message)")
    return parse_dry_run(proc.stdout, local_rules(root))


def plan(jobs: Iterable[Job]) -> list[RulePlan]:
    """Per rule, by name (a dry run's order varies from run to run): the job count, the largest
    requests, the reserved CPU-hours (jobs without a GPU) and GPU-hours (jobs with one), and the
    hours the cost model expects (the jobs' ``expected_s``) and the megabytes they write
    (``out_kb``); None where the rule publishes none."""
    by_rule: dict[str, list[Job]] = {}
    for job in jobs:
        by_rule.setdefault(job.rule, []).append(job)
    rows = []
    for rule, js in sorted(by_rule.items()):
        local = js[0].local
        cpu = 0.0 if local else sum(j.threads * j.runtime for j in js if not j.gpu) / 60
        gpu = 0.0 if local else sum(j.gpu * j.runtime for j in js if j.gpu) / 60
        modelled = [j.expected_s for j in js if j.expected_s is not None]
        written = [j.out_kb for j in js if j.out_kb is not None]
        rows.append(RulePlan(rule=rule, jobs=len(js), local=local, threads=max(j.threads for j in js),
                             mem_mb=max(j.mem_mb for j in js), runtime=max(j.runtime for j in js),
                             gpu=max(j.gpu for j in js), cpu_hours=cpu, gpu_hours=gpu,
                             expected_hours=sum(modelled) / 3600 if modelled else None,
                             out_mb=sum(written) / 1024 if written else None))
    return rows


def totals(rows: Sequence[RulePlan]) -> dict[str, float]:
    """All jobs, those the cluster runs, the reserved CPU- and GPU-hours, the largest memory
    request of a cluster job, the CPU- and GPU-hours the modelled rules expect and the megabytes
    they write."""
    cluster = [r for r in rows if not r.local]
    modelled = [r for r in rows if r.expected_hours is not None]
    return {"jobs": sum(r.jobs for r in rows), "cluster_jobs": sum(r.jobs for r in cluster),
            "cpu_hours": sum(r.cpu_hours for r in rows), "gpu_hours": sum(r.gpu_hours for r in rows),
            "mem_mb": max((r.mem_mb for r in cluster), default=0),
            "expected_cpu_hours": sum(r.expected_hours for r in modelled if not r.gpu),
            "expected_gpu_hours": sum(r.expected_hours for r in modelled if r.gpu),
            "out_mb": sum(r.out_mb for r in rows if r.out_mb is not None)}


def format_plan(rows: Sequence[RulePlan]) -> str:
    """The plan as a table, a row per rule and the total."""
    total = totals(rows)
    lines = ["Each job's requests (the largest of the rule's jobs: mem_mb, runtime in minutes, threads, GPUs), "
             "the hours the cluster reserves for them (runtime requests, margins included), the hours the "
             "rule's cost model expects (its work at the measured rates, no margin) and the megabytes its jobs "
             "write (uncompressed: an upper bound); '-': the rule has no model. GPU training rates were "
             "measured on one H100; the backbones' GPU rate is assumed.",
             f"{'rule':<18} {'jobs':>5} {'threads':>7} {'mem_mb':>7} {'runtime':>7} {'gpu':>3} {'CPU-h':>8} "
             f"{'GPU-h':>8} {'expected h':>10} {'out MB':>8}"]
    for r in rows:
        where = "  (local)" if r.local else ""
        expected = "-" if r.expected_hours is None else f"{r.expected_hours:.1f}"
        written = "-" if r.out_mb is None else f"{r.out_mb:,.0f}"
        lines.append(f"{r.rule:<18} {r.jobs:>5} {r.threads:>7} {r.mem_mb:>7} {r.runtime:>7} {r.gpu:>3} "
                     f"{r.cpu_hours:>8.1f} {r.gpu_hours:>8.1f} {expected:>10} {written:>8}{where}")
    lines.append(f"{'total':<18} {total['jobs']:>5} {'':>7} {total['mem_mb']:>7} {'':>7} {'':>3} "
                 f"{total['cpu_hours']:>8.1f} {total['gpu_hours']:>8.1f} {'':>10} {total['out_mb']:>8,.0f}")
    lines.append(f"{total['cluster_jobs']} jobs go to the cluster; the largest asks for {total['mem_mb']:,} MB. "
                 f"The modelled rules expect {total['expected_gpu_hours']:,.1f} GPU-hours and "
                 f"{total['expected_cpu_hours']:,.1f} CPU-hours and write at most {total['out_mb']:,.0f} MB.")
    return "\n".join(lines)
