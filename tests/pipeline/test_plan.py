"""`subaudit plan` (subaudit.pipeline.plan): a configuration's jobs and their requests, from
Snakemake's own dry run, checked against the dry run's job table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import job_table as dry_run_table
from conftest import paper_dry_run
from subaudit.pipeline.plan import Job, local_rules, parse_dry_run, plan

ROOT = Path(__file__).resolve().parents[2]


def job_table(out: str) -> dict[str, int]:
    """Snakemake's own count of the jobs of each rule (the dry run's table), without all."""
    return {rule: n for rule, n in dry_run_table(out).items() if rule != "all"}


DEEP_FIGURE = ("--", "results/figures/deep-one-run.png")     # the dry runs test_config reads too


@pytest.mark.parametrize("presets", [(), ("presets/table2.yaml", *DEEP_FIGURE),
                                     ("presets/table2-slice.yaml", *DEEP_FIGURE), ("presets/rehearsal.yaml",)],
                         ids=["paper", "table2", "table2-slice", "rehearsal"])
def test_the_plan_counts_the_jobs_the_dry_run_counts(presets):
    """Over the paper preset (with gpu.yaml) and each preset that narrows (its deep phase's jobs)
    or shrinks it: the plan's jobs per rule are the dry run's table, each with a memory and a
    time request; GPU jobs only where the configuration computes on a GPU."""
    out = paper_dry_run(*presets)
    jobs = parse_dry_run(out, local_rules(ROOT))
    rows = plan(jobs)
    assert {r.rule: r.jobs for r in rows} == job_table(out)
    assert all(j.mem_mb > 0 and j.runtime > 0 for j in jobs)
    assert {r.rule for r in rows if r.gpu} == {"features", "train_shard", "train_target", "utility", "one_run",
                                               "deep_audit", "deep_canaries", "deep_pretrain"} & {r.rule for r in rows}
    for r in rows:      # the hours are the requests summed: GPU jobs in GPU-hours, local rules reserve none
        js = [j for j in jobs if j.rule == r.rule]
        expect = sum(j.runtime * (j.gpu or j.threads) for j in js) / 60
        assert (r.cpu_hours + r.gpu_hours) == pytest.approx(0 if r.local else expect)
        assert r.mem_mb == max(j.mem_mb for j in js)
        if r.out_mb is not None:
            assert r.out_mb == pytest.approx(sum(j.out_kb for j in js) / 1024)
    # every cluster rule but split (seconds: one archive read and split) has a cost model and
    # publishes what it expects (no margin), below what it reserves
    modelled = {r.rule: r for r in rows if r.expected_hours is not None}
    assert set(modelled) == {r.rule for r in rows if not r.local} - {"split"}
    assert all(r.expected_hours <= r.cpu_hours + r.gpu_hours for r in modelled.values())


def test_plan_on_the_default_from_the_command_line():
    """`subaudit plan --json` in the workflow's folder: the default's dry-run table, the local rules
    its rule files declare, no GPU (natural.device: cpu), the total the rows' sum."""
    proc = subprocess.run([Path(sys.executable).parent / "subaudit", "plan", "--json"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    dry = subprocess.run([Path(sys.executable).parent / "snakemake", "-n", "--forceall"], cwd=ROOT,
                         capture_output=True, text=True)
    assert {r["rule"]: r["jobs"] for r in out["rules"]} == job_table(dry.stdout)
    assert out["total"]["jobs"] == sum(job_table(dry.stdout).values())
    assert out["total"]["gpu_hours"] == 0 and out["total"]["cpu_hours"] == pytest.approx(
        sum(r["cpu_hours"] for r in out["rules"]))
    local = {r["rule"] for r in out["rules"] if r["local"]}
    assert {"acquire", "estimate_natural", "report", "deep_bounds", "deep_figure",
            "reconstruction"} <= local  # if-blocks too
    assert "train_shard" not in local


def test_a_dry_run_block_becomes_a_job():
    text = ("[Sun Nov 29 07:44:43 2026]\nrule train_shard:\n    input: a\n    output: b, c\n    threads: 2\n"
            "    resources: tmpdir=/tmp, mem_mb=2512, mem=2 GB, runtime=240, gpu=1\n\n"
            "[Sun Nov 29 07:44:43 2026]\nrule report:\n    resources: tmpdir=/tmp, mem_mb=2000, runtime=10\n"
            "[Sun Nov 29 07:44:43 2026]\nrule all:\n    input: b\n")
    assert parse_dry_run(text, {"report"}) == [Job("train_shard", False, 2, 2512, 240, 1),
                                               Job("report", True, 1, 2000, 10, 0)]
    with pytest.raises(ValueError, match="rule craft requests no runtime"):
        parse_dry_run("rule craft:\n    resources: mem_mb=10\n")


def test_the_paper_presets_expected_gpu_hours_are_deep_costs_count_at_the_measured_rate():
    """The plan's expected hours of the deep audits are the examples `deep-cost` counts
    (integrations.deep.audit_examples, a count of its own) at the H100 rate NETWORK_COSTS
    records for WRN-16-4, within the rounding up of each job's seconds."""
    from snakemake.utils import update_config

    from subaudit.integrations.deep import audit_examples
    from subaudit.pipeline.config import load_params, read_yaml
    from subaudit.pipeline.costs import NETWORK_COSTS

    params = load_params(ROOT / "params.yaml")
    for preset in ("paper", "gpu"):
        update_config(params, read_yaml(ROOT / f"presets/{preset}.yaml"))
    rows = {r.rule: r for r in plan(parse_dry_run(paper_dry_run(), local_rules(ROOT)))}
    audits = rows["deep_audit"]
    examples = sum(audit_examples(params["deep"]).values())
    assert 0 <= audits.expected_hours * 3600 - examples / NETWORK_COSTS["wrn-16-4"].rate["cuda"] <= audits.jobs
