"""Commands around the workflow: ``deep-cost`` (the deep phase's cost from a measured rate),
``prefetch`` (every download of a configuration), ``plan`` (its jobs and reserved hours before
submitting), ``compare`` (a run against a reference) and ``verify`` (damaged artifacts)."""

from __future__ import annotations

import argparse
from pathlib import Path

from subaudit.artifacts import dumps
from subaudit.cli.arguments import Command, UsageError, configuration, configuration_flags, emit, integer
from subaudit.validation import ParameterError

__all__ = ["COMMANDS"]


def _deep_cost_flags(sp: argparse.ArgumentParser) -> None:
    configuration_flags(sp)
    sp.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    sp.add_argument("--batch", type=integer, default=64, help="batch of the measurement (rates are per example)")
    sp.add_argument("--steps", type=integer, default=5, help="timed steps after one warm-up step")


def _deep_cost(args: argparse.Namespace) -> None:
    import warnings

    from subaudit.data import SOURCES
    from subaudit.devices import resolve_device
    from subaudit.integrations.deep import audit_examples, training_rate
    from subaudit.scenarios.deep_cases import case_training, case_trainings

    params = configuration(args)
    deep = params["deep"]
    if deep["source"] is None:
        raise UsageError("deep.source is null: this configuration has no deep-network audits")
    source = SOURCES[deep["source"]]
    channels, side = (source.shape[2] if len(source.shape) == 3 else 1), source.shape[0]
    device = str(resolve_device(args.device))
    warnings.filterwarnings("ignore", module="opacus")
    warnings.filterwarnings("ignore", message="Full backward hook")
    rate = training_rate(deep["network"], classes=source.classes, channels=channels, side=side,
                         batch=args.batch, steps=args.steps, device=device, precision=deep["precision"])
    per_case = audit_examples(deep)
    total = sum(per_case.values())
    out = {"network": deep["network"], "device": device, "precision": deep["precision"], "measured_batch": args.batch,
           "examples_per_second": rate, "examples": per_case, "total_examples": total,
           "hours": total / rate / 3600}
    lines = [f"{deep['network']} on {device} in {deep['precision']}: {rate:,.0f} examples/s with Opacus "
             f"(batch {args.batch}, measured)"]
    trainings = case_trainings(deep)
    for case, n in per_case.items():
        c = case_training(deep, case)
        lines.append(f"  {case}: {n:,} examples ({trainings[case]} DP trainings x {c['steps']} steps x "
                     f"{c['batch']} records x {c.get('augmentations', 1)} augmentation views)")
    lines.append(f"  all DP trainings: {total:,} examples, about {out['hours']:.3g} hours at that rate "
                 "(plus the metagradient crafting and pretraining: `subaudit plan` lists every job's request)")
    emit(out, args.json, "\n".join(lines))


def _prefetch_flags(sp: argparse.ArgumentParser) -> None:
    configuration_flags(sp)
    sp.add_argument("--root", default=".", help="the workflow's directory: archives go to ROOT/data/raw")
    sp.add_argument("--no-weights", action="store_true", help="datasets only, no backbone weights")


def _prefetch(args: argparse.Namespace) -> None:
    from subaudit.pipeline.prefetch import prefetch

    if not Path(args.root).is_dir():
        raise ParameterError("root", args.root, "an existing folder (the workflow's, which holds data/raw)")
    done = prefetch(configuration(args), args.root, weights=not args.no_weights,
                    say=(lambda _m: None) if args.json else print)
    if args.json:
        print(dumps({k: str(v) for k, v in done.items()}))


def _plan_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--configfile", nargs="*", default=[], help="presets merged over ROOT/params.yaml, as "
                                                               "snakemake does")
    sp.add_argument("--root", default=".", help="the workflow's folder (default: here)")


def _plan(args: argparse.Namespace) -> None:
    from subaudit.pipeline.plan import format_plan, plan, planned_jobs, totals

    root = Path(args.root)
    if not (root / "Snakefile").is_file():
        raise ParameterError("root", args.root, "the workflow's folder (it holds the Snakefile and params.yaml)")
    args.params = str(root / "params.yaml")
    configuration(args)                          # bad input: one line naming the key, before the dry run
    try:
        rows = plan(planned_jobs(root, [Path(c).resolve() for c in args.configfile]))
    except (RuntimeError, ValueError) as err:
        raise UsageError(str(err)) from None
    emit({"rules": [vars(r) for r in rows], "total": totals(rows)}, args.json, format_plan(rows))


def _compare_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("run", metavar="RUN", help="a run's folder (its results/) or a results folder")
    sp.add_argument("reference", metavar="REFERENCE", help="a results folder (e.g. reference, kept in git) or a git "
                                                           "revision (its reference/, else its results from DVC)")
    sp.add_argument("--repo", default=".", help="the git repository a revision names (default: here)")
    sp.add_argument("--limit", type=integer, default=10, help="values listed per file that differ (default 10)")


def _compare(args: argparse.Namespace) -> int:
    from subaudit.reporting.compare import compare, format_comparison

    result = compare(args.run, args.reference, repo=args.repo)
    emit(result.as_dict(), args.json, format_comparison(result, limit=args.limit))
    return 0 if result.agrees else 1


def _verify_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (e.g. results data)")
    sp.add_argument("--remove", action="store_true",
                    help="delete the damaged outputs of the workflow (below data/raw, data/splits, data/features "
                         "or results of --workdir; never anything else) and print the command that rebuilds them")
    sp.add_argument("--workdir", default=".",
                    help="the workflow's working directory, whose output folders --remove may delete from "
                         "(default: the current directory)")


def _verify(args: argparse.Namespace) -> int:
    import shlex

    from subaudit.artifacts import verify
    from subaudit.pipeline.settings import OUTPUT_ROOTS

    for p in args.paths:  # a mistyped path (or a symlink loop) is not "nothing damaged"
        if not Path(p).exists():
            raise ParameterError("paths", p, "an existing file or folder to verify")
    files, bad, stale = verify(args.paths)
    workdir = Path(args.workdir).resolve()
    roots = [workdir / r for r in OUTPUT_ROOTS]

    def rebuildable(path: Path) -> bool:
        return any(path.resolve().is_relative_to(r) for r in roots)

    removed, kept = [], []
    for err in bad:
        if args.remove and rebuildable(err.path) and not err.foreign:
            err.path.unlink(missing_ok=True)
            removed.append(err)
        else:
            kept.append(err)
    if args.remove:
        for f in stale:
            f.unlink(missing_ok=True)
    targets = [str(e.path.resolve().relative_to(workdir)) for e in removed]
    rebuild = (f"snakemake --cores all {' '.join(map(shlex.quote, targets))}" if targets else None)
    result = {"checked": len(files), "removed": [str(e.path) for e in removed],
              "damaged": [{"path": str(e.path), "reason": e.reason, "removed": e in removed,
                           "workflow_output": rebuildable(e.path) and not e.foreign} for e in bad],
              "stale_temporary_files": [str(f) for f in stale], "rebuild": rebuild}
    lines = []
    for e in bad:
        if e in removed:
            lines.append(f"removed: {e.path} ({e.reason})")
        elif e.foreign or not rebuildable(e.path):
            why = ("not written by subaudit" if e.foreign
                   else f"not an output of the workflow in {workdir} (under {', '.join(OUTPUT_ROOTS)})")
            lines.append(f"damaged, kept: {e.path} ({e.reason}; {why}: the workflow cannot rebuild it, "
                         "repair or replace it yourself)")
        else:
            lines.append(f"damaged: {e.path} ({e.reason})")
    lines += [f"{'removed' if args.remove else 'left'} by a killed writer: {f}" for f in stale]
    lines.append(f"{len(files)} artifacts checked, {len(bad)} damaged"
                 + (f", {len(removed)} removed" if args.remove else ""))
    if rebuild:
        lines.append("rebuild them (Snakemake does not rebuild a missing file whose consumers are up to date; "
                     f"add the --configfile options of the run that wrote them):\n  {rebuild}")
    elif any(not e.foreign and rebuildable(e.path) for e in kept):
        lines.append("`subaudit verify --remove` deletes the damaged workflow outputs and prints the command that "
                     "rebuilds them")
    emit(result, args.json, "\n".join(lines))
    return 1 if kept else 0


COMMANDS = [
    Command("deep-cost", "cost of a configuration's deep-network audits from a measured Opacus training rate on "
            "this machine", _deep_cost_flags, _deep_cost),
    Command("prefetch", "download every dataset and pretrained weight a configuration needs (on a login node "
            "with internet), verified", _prefetch_flags, _prefetch),
    Command("plan", "a configuration's jobs before submitting: per rule the job count, requests and reserved CPU- "
            "and GPU-hours (Snakemake's dry run)", _plan_flags, _plan),
    Command("compare", "every number of a run's figure CSVs and report.json against a reference; exit status 1 "
            "when one moved beyond the printed precision", _compare_flags, _compare),
    Command("verify", "find damaged artifacts (.npz, .json, .csv) before use", _verify_flags, _verify),
]
