"""The ``subaudit`` command line: privacy accounting, statements, estimation and audits.

Accountants, privacy statements, calibration, estimation, ceilings, one-run audits, S1
simulation, bench, artifact checks.

The flags are a contract (tests and users script against them). With ``--json`` a
command prints exactly one JSON object on stdout. A bad input (a value out of its range, a
count whose arrays would not fit in memory, a file that is missing, a folder, unreadable or
not in an accepted layout) exits with status 2 and one line on stderr naming the flag or
file and what is allowed; a valid setting beyond the accountant's numerical reach, degenerate
data or a failing disk exit with 1, also in one line. No input gives a traceback.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from subaudit.accounting.discretisation import AccountingRangeError
from subaudit.estimation import DEFAULT_ESTIMATOR, ESTIMATORS
from subaudit.artifacts import dumps
from subaudit.estimation.one_run import GUESS_RULES, ONE_RUN_METHODS
from subaudit.pipeline.score_files import SCORE_LAYOUTS
from subaudit import __version__
from subaudit.validation import ConfigError, ParameterError

S1_ADJACENCIES = ("substitute", "add-remove")

#: The flags that describe an accounting request, named in an AccountingRangeError.
_SETTING_FLAGS = ("sigma", "q", "steps", "target_epsilon", "delta")


def _listed(value: Any) -> str:
    """A flag's value as typed: numbers by %g, lists space-separated."""
    values = value if isinstance(value, list) else [value]
    return " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


# Library parameter names that differ from their flag.
_FLAG_OF = {"runs_per_world": "--runs", "target_epsilon": "--target-epsilon", "paths": "PATH",
            "reference": "REFERENCE"}


class UsageError(Exception):
    """A one-line usage problem, already phrased for the user."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _flag(name: str) -> str:
    if name.startswith("history["):  # a segment's value: "history[i] sigma"
        index, key = name[len("history["):].split("] ")
        return f"--{key} (segment {int(index) + 1})"
    return _FLAG_OF.get(name, "--" + name.replace("_", "-"))


def _emit(result: dict[str, Any], as_json: bool, text: str) -> None:
    if as_json:
        print(dumps(result))
    else:
        print(text)


def _segments(args: argparse.Namespace) -> list[tuple[float, float, int]]:
    """(sigma, q, steps) per segment from --sigma/--q/--steps (one value is repeated)."""
    lists = {"sigma": args.sigma, "q": args.q, "steps": args.steps}
    n = max(len(v) for v in lists.values())
    for name, values in lists.items():
        if len(values) not in (1, n):
            raise UsageError(f"--sigma, --q and --steps take one value each per segment (or one "
                             f"value for all); got {len(values)} for --{name} and {n} segments")
    return [tuple(v[i] if len(v) > 1 else v[0] for v in lists.values()) for i in range(n)]


def _cmd_account(args: argparse.Namespace) -> None:
    from subaudit.accounting import epsilon_of_history

    segments = _segments(args)
    res = epsilon_of_history(segments, args.delta, args.adjacency)
    out = _as_dict(res)
    out["segments"] = [list(s) for s in res.segments]
    text = f"epsilon = {res.epsilon:.6g} ({res.adjacency}, delta = {res.delta:g})"
    if res.delta_add_remove is not None:
        text += f"; from add/remove at delta' = {res.delta_add_remove:.6g}"
    if len(res.segments) > 1:
        text += f"; {len(res.segments)} segments, {res.steps} steps"
    _emit(out, args.json, text)


def _cmd_statement(args: argparse.Namespace) -> None:
    from subaudit.accounting.statement import privacy_statement

    st = privacy_statement(_segments(args), args.delta)
    fields = st.to_dict()
    rows = [("add/remove", st.add_remove), ("substitute", st.substitute), ("group privacy", st.group)]
    lines = [f"{'adjacency':<14} {'epsilon':>10} {'estimate':>10} {'lower':>10}  note"]
    for name, e in rows:
        if e is None:
            lines.append(f"{name:<14} {'-':>10} {'-':>10} {'-':>10}  {st.group_error}")
            continue
        note = f"2 eps_AR at delta' = {e.delta_add_remove:.3g}" if e.delta_add_remove is not None else ""
        lines.append(f"{name:<14} {e.epsilon:>10.5g} {e.epsilon_estimate:>10.5g} "
                     f"{e.epsilon_lower:>10.5g}  {note}")
    lines += [f"eps_S / eps_AR = {st.ratio:.4g} at delta = {st.delta:g}", "", "Assumptions:"]
    lines += [f"- {a}" for a in fields["assumptions"]]
    lines += ["", st.sentence()]
    _emit(fields, args.json, "\n".join(lines))


def _cmd_calibrate(args: argparse.Namespace) -> None:
    from subaudit.accounting import calibrate_sigma, epsilon

    sigma = calibrate_sigma(args.target_epsilon, args.q, args.steps, args.delta, args.adjacency)
    res = epsilon(sigma, args.q, args.steps, args.delta, args.adjacency)
    out = {"target_epsilon": args.target_epsilon, "q": args.q, "steps": args.steps,
           **_as_dict(res), "sigma": sigma}
    _emit(out, args.json, f"sigma = {sigma:.6g} gives epsilon = {res.epsilon:.6g} "
                          f"({res.adjacency}, delta = {res.delta:g})")


def _cmd_gdp_epsilon(args: argparse.Namespace) -> None:
    from subaudit.accounting.gdp import gdp_epsilon

    eps = gdp_epsilon(args.mu, args.delta)
    _emit({"epsilon": eps, "mu": args.mu, "delta": args.delta}, args.json,
          f"epsilon = {eps:.6g} (mu = {args.mu:g}-GDP at delta = {args.delta:g})")


def _scores_file(path: str, flag: str, step: int | None = None) -> tuple[Any, Any]:
    """(scores, labels) from an audit's scores file, or a UsageError naming ``flag``, the file
    and what is wrong with it (missing, a folder, not one of the layouts, damaged)."""
    from subaudit.pipeline.score_files import load_audit_scores

    try:
        return load_audit_scores(path, step)
    except ParameterError:          # --step: not a checkpoint of the file
        raise
    except (OSError, ValueError) as err:
        raise UsageError(f"{flag} {err}") from None


def _cmd_estimate(args: argparse.Namespace) -> None:
    from subaudit.estimation import estimate_epsilon, reversed_evidence, score_summary

    scores, labels = _scores_file(args.scores, "SCORES", args.step)
    est = estimate_epsilon(scores, labels, delta=args.delta, alpha=args.alpha,
                           estimator=args.estimator)
    summary = score_summary(scores, labels)
    backwards = reversed_evidence(scores, labels, delta=args.delta, alpha=args.alpha)
    if backwards > 0:
        print(f"subaudit estimate: warning: the scores look reversed: label 0 (D') scores higher "
              f"(AUC {summary['auc']:.3g}); negated, they give epsilon >= {backwards:.4g}. "
              "subaudit predicts D (label 1) for high scores: negate the scores if label 1 "
              "is the world with the target z.", file=sys.stderr)
    out = {**est.to_dict(), **summary}
    _emit(out, args.json,
          f"epsilon >= {est.epsilon:.6g} at delta = {est.delta:g} (estimator {est.estimator}, "
          + (f"mu = {est.mu:.4g}, " if "mu" in est.details else "")
          + f"confidence {1 - est.alpha:g}); AUC {summary['auc']:.4g}, "
          f"TPR {summary['tpr_at_fpr_0.001']:.3g} at FPR 1e-3 and {summary['tpr_at_fpr_0.01']:.3g} "
          f"at 1e-2, {summary['n_positive']} runs with D and {summary['n_negative']} with D'")


def _cmd_ceiling(args: argparse.Namespace) -> None:
    from subaudit.estimation.ceilings import MAX_TERMS, final_iterate_curve, final_iterate_epsilon

    out: dict[str, Any] = {"sigma": args.sigma, "q": args.q, "steps": args.steps,
                           "delta": args.delta, "adjacency": args.adjacency}
    budget = MAX_TERMS if args.max_terms is None else args.max_terms
    if args.every is None:
        eps = final_iterate_epsilon(args.sigma, args.q, args.steps, args.delta, args.adjacency, max_terms=budget)
        lines = []
    else:
        steps, curve = final_iterate_curve(args.sigma, args.q, args.steps, args.every, args.delta,
                                           args.adjacency, max_terms=budget, progress=True)
        eps = float(curve[-1])
        out.update(every=args.every, curve_steps=steps.tolist(), curve_epsilon=curve.tolist())
        lines = [f"  after {t:>6d} steps: {e:.6g}" for t, e in zip(steps, curve)]
    _emit({"epsilon": eps, **out}, args.json,
          "\n".join(lines + [f"epsilon = {eps:.6g}: final-iterate ceiling of the worst-case canary "
                              f"({args.adjacency}, delta = {args.delta:g})"]))


def _one_run_family(args: argparse.Namespace) -> tuple[str, Any]:
    """The f-DP family of ``--family`` and, for ``dpsgd``, the training's curve (``--q``, ``--steps``,
    ``--adjacency``)."""
    from subaudit.estimation.one_run import DPSGDCurve

    given = {k: getattr(args, k) for k in ("q", "steps") if getattr(args, k) is not None}
    if args.method != "fdp" and args.family != "dp":
        raise ParameterError("family", args.family, "dp (the steinke bound is an (eps, delta) bound)")
    if args.family != "dpsgd":
        if given:
            raise UsageError("--q and --steps describe the training for --family dpsgd only")
        return args.family, None
    if len(given) != 2:
        raise UsageError("--family dpsgd needs the training's --q and --steps")
    return "dpsgd", DPSGDCurve(args.q, args.steps, args.adjacency)


@contextmanager
def _curve_in_reach(args: argparse.Namespace) -> Iterator[None]:
    """--family dpsgd: a training whose curve the accountant cannot resolve at the noise
    multipliers the bound searches is named by its flags (the library names its sigma)."""
    try:
        yield
    except ParameterError as err:
        if err.name != "sigma":
            raise
        raise UsageError(f"--family dpsgd --q {args.q:g} --steps {args.steps}: the accountant resolves DP-SGD's "
                         f"curve at no noise multiplier the bound searches (sigma = {err.value:g} failed): a "
                         "training of fewer steps") from None


def _cmd_one_run(args: argparse.Namespace) -> None:
    from subaudit.estimation.one_run import FDP_FAMILIES, best_one_run_epsilon
    from subaudit.estimation.procedures import claim_prefix
    from subaudit.estimation.roc import validate_scores_labels

    family, mechanism = _one_run_family(args)
    counts = (args.canaries, args.guesses, args.correct)
    if args.scores is not None:
        if any(c is not None for c in counts):
            raise UsageError("give either --scores or --canaries/--guesses/--correct, not both")
        scores, labels = _scores_file(args.scores, "--scores")
        try:        # the label checks of `estimate`: labels 0/1 (or bool), both present
            scores, labels = validate_scores_labels(scores, labels)
        except ValueError as err:
            raise UsageError(f"--scores {args.scores}: {err} (label 1: the canary was inserted)") from None
        with _curve_in_reach(args):
            eps = best_one_run_epsilon(scores, labels.astype(bool), args.delta, args.alpha, args.method, args.k,
                                       rule=args.rule, family=family, mechanism=mechanism)
        out = {"epsilon": eps, "method": args.method, "canaries": int(scores.size), "rule": args.rule,
               "guesses": "searched (Bonferroni over the guess grid)"}
    else:
        if any(c is None for c in counts):
            raise UsageError("give --canaries, --guesses and --correct (or --scores FILE)")
        kwargs = {"k": args.k, "family": family, "mechanism": mechanism} if args.method == "fdp" else {}
        if args.method != "fdp" and args.k != 2:
            raise ParameterError("k", args.k, "2 (the steinke bound is for membership)")
        with _curve_in_reach(args):
            eps = ONE_RUN_METHODS[args.method](args.canaries, args.guesses, args.correct, args.delta,
                                               args.alpha, **kwargs)
        out = {"epsilon": eps, "method": args.method, "canaries": args.canaries,
               "guesses": args.guesses, "correct": args.correct}
    out.update(delta=args.delta, alpha=args.alpha, k=args.k, family=family, tests=FDP_FAMILIES[family].description)
    _emit(out, args.json, f"{claim_prefix(family)} {eps:.6g} at delta = {args.delta:g} (one-run {args.method}, "
                          f"confidence {1 - args.alpha:g}; {FDP_FAMILIES[family].description})")


def _configuration(args: argparse.Namespace) -> dict[str, Any]:
    """``--params`` with each ``--configfile`` merged over it as Snakemake merges them, validated,
    narrowed to the experiments and cases its selection lists name (what the workflow runs)."""
    from subaudit.pipeline.config import load_params, read_yaml, selected

    if not Path(args.params).exists():
        raise UsageError(f"--params {args.params}: no such file (run in the workflow's folder, or give --params FILE)")
    try:
        params = load_params(args.params)
    except ConfigError as err:
        raise UsageError(f"--params {err}") from None
    if args.configfile:
        from snakemake.utils import update_config   # how Snakemake merges --configfile

        from subaudit.pipeline.config import validate_params

        for extra in args.configfile:
            try:
                update_config(params, read_yaml(extra))
            except ConfigError as err:
                raise UsageError(f"--configfile {err}") from None
        validate_params(params, source=" + ".join([args.params, *args.configfile]))
    return selected(params)


def _cmd_prefetch(args: argparse.Namespace) -> None:
    from subaudit.pipeline.prefetch import prefetch

    if not Path(args.root).is_dir():
        raise ParameterError("root", args.root, "an existing folder (the workflow's, which holds data/raw)")
    done = prefetch(_configuration(args), args.root, weights=not args.no_weights,
                    say=(lambda _m: None) if args.json else print)
    if args.json:
        print(dumps({k: str(v) for k, v in done.items()}))


def _cmd_deep_cost(args: argparse.Namespace) -> None:
    import warnings

    from subaudit.data import SOURCES
    from subaudit.devices import resolve_device
    from subaudit.integrations.deep import audit_examples, training_rate
    from subaudit.scenarios.deep_cases import case_training, case_trainings

    params = _configuration(args)
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
    _emit(out, args.json, "\n".join(lines))


def _cmd_plan(args: argparse.Namespace) -> None:
    from subaudit.pipeline.plan import format_plan, plan, planned_jobs, totals

    root = Path(args.root)
    if not (root / "Snakefile").is_file():
        raise ParameterError("root", args.root, "the workflow's folder (it holds the Snakefile and params.yaml)")
    args.params = str(root / "params.yaml")
    _configuration(args)                          # bad input: one line naming the key, before the dry run
    try:
        rows = plan(planned_jobs(root, [Path(c).resolve() for c in args.configfile]))
    except (RuntimeError, ValueError) as err:
        raise UsageError(str(err)) from None
    _emit({"rules": [vars(r) for r in rows], "total": totals(rows)}, args.json, format_plan(rows))


def _cmd_compare(args: argparse.Namespace) -> int:
    from subaudit.reporting.compare import compare, format_comparison

    result = compare(args.run, args.reference, repo=args.repo)
    _emit(result.as_dict(), args.json, format_comparison(result, limit=args.limit))
    return 0 if result.agrees else 1


def _cmd_simulate_s1(args: argparse.Namespace) -> None:
    import pandas as pd

    from subaudit.artifacts import write_csv
    from subaudit.scenarios.s1 import simulate_s1

    if Path(args.out).is_dir():
        raise ParameterError("out", args.out, "a CSV file's path (this is a folder)")
    audit = simulate_s1(args.sigma, args.q, args.steps, args.runs, adjacency=args.adjacency,
                        seed=args.seed)
    frame = pd.DataFrame({"score": audit.scores[-1], "label": audit.labels.astype(int)})
    write_csv(args.out, frame)
    if not args.quiet:
        print(f"wrote {len(frame)} runs ({args.runs} per world) to {args.out}", file=sys.stderr)


def _cmd_bench(args: argparse.Namespace) -> None:
    from subaudit.engine.bench import format_table, run_bench
    from subaudit.devices import resolve_device

    def say(msg: str) -> None:
        if not args.json:
            print(f"measuring {msg} ...", file=sys.stderr)

    result = run_bench(quick=args.quick, progress=say, device=resolve_device(args.device))
    _emit(result, args.json, format_table(result))


def _cmd_verify(args: argparse.Namespace) -> int:
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
    _emit(result, args.json, "\n".join(lines))
    return 1 if kept else 0


def _as_dict(obj: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(obj)


def _float(text: str) -> float:
    """A finite number (argparse's float takes "nan" and "inf")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _s1_adjacency(text: str) -> str:
    """add-remove or substitute, also spelled as dp-accounting and Flower do (replace-one, ...)."""
    from subaudit.accounting import canonical_adjacency

    try:
        name = canonical_adjacency(text)
    except ParameterError:
        name = None
    if name not in S1_ADJACENCIES:
        raise argparse.ArgumentTypeError(
            f"expected add-remove (also add-or-remove-one) or substitute (also replace-one), got {text!r}")
    return name


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    p = _Parser(prog="subaudit", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, func: Callable[[argparse.Namespace], int | None], help: str,
                json: bool = True) -> argparse.ArgumentParser:
        """A subcommand running ``func``, with ``--json`` unless it prints no result."""
        sp = sub.add_parser(name, help=help)
        if json:
            sp.add_argument("--json", action="store_true", help="print one JSON object")
        sp.set_defaults(func=func)
        return sp

    def dp_args(sp: argparse.ArgumentParser, sigma: bool = True) -> None:
        if sigma:
            sp.add_argument("--sigma", type=_float, required=True, help="noise multiplier (> 0)")
        sp.add_argument("--q", type=_float, required=True, help="Poisson sampling rate in (0, 1]")
        sp.add_argument("--steps", type=_int, required=True, help="training steps T (>= 1)")

    def history_args(sp: argparse.ArgumentParser) -> None:
        each = "; several values: one per segment of a training whose settings changed"
        sp.add_argument("--sigma", type=_float, nargs="+", required=True,
                        help="noise multiplier (> 0)" + each)
        sp.add_argument("--q", type=_float, nargs="+", required=True,
                        help="Poisson sampling rate in (0, 1]" + each)
        sp.add_argument("--steps", type=_int, nargs="+", required=True,
                        help="training steps (>= 1)" + each)
        sp.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")

    adjacency_help = ("add-remove (also add-or-remove-one), substitute (also replace-one) or group; "
                      "case and _ / - do not matter")
    sp = command("account", _cmd_account, "epsilon of Poisson-subsampled Gaussian DP-SGD")
    history_args(sp)
    sp.add_argument("--adjacency", required=True, help=adjacency_help)

    sp = command("statement", _cmd_statement, "add/remove, substitute and group-privacy epsilon side by "
                                              "side, with the assumptions: a statement to quote")
    history_args(sp)

    sp = command("calibrate", _cmd_calibrate, "noise multiplier reaching a target epsilon")
    sp.add_argument("--target-epsilon", type=_float, required=True, help="target epsilon (> 0)")
    dp_args(sp, sigma=False)
    sp.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    sp.add_argument("--adjacency", required=True, help=adjacency_help)

    sp = command("gdp-epsilon", _cmd_gdp_epsilon, "epsilon at delta of a mu-GDP mechanism")
    sp.add_argument("--mu", type=_float, required=True, help="GDP parameter mu (> 0)")
    sp.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")

    sp = command("estimate", _cmd_estimate, "empirical lower bound on epsilon from audit scores")
    sp.add_argument("scores", metavar="SCORES", help="audit scores: " + "; or ".join(SCORE_LAYOUTS))
    sp.add_argument("--step", type=_int, help="checkpoint of a subaudit score file (default: the last)")
    sp.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    sp.add_argument("--alpha", type=_float, default=0.05, help="significance level in (0, 1)")
    sp.add_argument("--estimator", choices=list(ESTIMATORS), default=DEFAULT_ESTIMATOR,
                    help="; ".join(f"{e.name}: {e.description}" for e in ESTIMATORS.values())
                    + f" (default {DEFAULT_ESTIMATOR})")

    sp = command("ceiling", _cmd_ceiling, "final-iterate ceiling: epsilon of the optimal test on the "
                                          "worst-case canary's cumulative gradient")
    dp_args(sp)
    sp.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    sp.add_argument("--adjacency", type=_s1_adjacency, default="substitute",
                    help="substitute (also replace-one) or add-remove (also add-or-remove-one)")
    sp.add_argument("--every", type=_int, help="also the ceiling after every k-th step (and the last)")
    sp.add_argument("--max-terms", type=_int, default=None,
                    help="refuse a request that sums over more binomial terms than this (all checkpoints "
                         "together; the cost is linear in them, about 19,000 a second on one core; "
                         "default 20,000,000)")

    sp = command("one-run", _cmd_one_run, "one-run audit: epsilon lower bound from m canaries in one training")
    sp.add_argument("--method", choices=list(ONE_RUN_METHODS), required=True,
                    help="steinke: Steinke, Nasr and Jagielski 2023; fdp: Mahloujifar, Melis and "
                         "Chaudhuri 2024 (f-DP, k-ary games; the curve: --family)")
    sp.add_argument("--family", choices=["dp", "gdp", "dpsgd"], default="dp",
                    help="the trade-off curve fdp tests: dp, the (epsilon, delta) curve, valid for every "
                         "mechanism (default); gdp, a test of mu-GDP (valid only for Gaussian mechanisms); "
                         "dpsgd, DP-SGD's own curve at --q and --steps (the bound: the epsilon of the "
                         "smallest noise multiplier it rejects)")
    sp.add_argument("--q", type=_float, help="--family dpsgd: the training's Poisson sampling rate")
    sp.add_argument("--steps", type=_int, help="--family dpsgd: the training's steps")
    sp.add_argument("--adjacency", default="add-remove",
                    help="--family dpsgd: add-remove (membership game) or substitute")
    sp.add_argument("--canaries", type=_int, help="m: canaries in the run")
    sp.add_argument("--guesses", type=_int, help="r: guesses made (the rest abstained)")
    sp.add_argument("--correct", type=_int, help="v: correct guesses")
    sp.add_argument("--scores", help="scores in one of estimate's layouts (a CSV with columns score,label, "
                                     "label 1: inserted, 0: not) instead of counts: guesses chosen from the "
                                     "scores as the papers do")
    sp.add_argument("--delta", type=_float, required=True, help="delta in [0, 1) (steinke) or (0, 1) (fdp)")
    sp.add_argument("--alpha", type=_float, default=0.05, help="significance level in (0, 1)")
    sp.add_argument("--k", type=_int, default=2, help="values per canary (fdp k-ary games; 2 = membership)")
    sp.add_argument("--rule", choices=list(GUESS_RULES), default="top-bottom",
                    help="with --scores: top-bottom (Steinke et al.: 'in' on the highest scores, 'out' on the "
                         "lowest) or magnitude (Mahloujifar et al.'s pairs: the largest |score| guessed by "
                         "sign, for pair score differences)")

    sp = command("deep-cost", _cmd_deep_cost, "cost of a configuration's deep-network audits from a measured "
                                              "Opacus training rate on this machine")
    sp.add_argument("--params", default="params.yaml", help="the parameters file (default params.yaml)")
    sp.add_argument("--configfile", nargs="*", default=[], help="presets merged over it, as snakemake does")
    sp.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    sp.add_argument("--batch", type=_int, default=64, help="batch of the measurement (rates are per example)")
    sp.add_argument("--steps", type=_int, default=5, help="timed steps after one warm-up step")

    sp = command("prefetch", _cmd_prefetch, "download every dataset and pretrained weight a configuration "
                                            "needs (on a login node with internet), verified")
    sp.add_argument("--params", default="params.yaml", help="the parameters file (default params.yaml)")
    sp.add_argument("--configfile", nargs="*", default=[], help="presets merged over it, as snakemake does")
    sp.add_argument("--root", default=".", help="the workflow's directory: archives go to ROOT/data/raw")
    sp.add_argument("--no-weights", action="store_true", help="datasets only, no backbone weights")

    sp = command("plan", _cmd_plan, "a configuration's jobs before submitting: per rule the job count, "
                                    "requests and reserved CPU- and GPU-hours (Snakemake's dry run)")
    sp.add_argument("--configfile", nargs="*", default=[], help="presets merged over ROOT/params.yaml, as "
                                                               "snakemake does")
    sp.add_argument("--root", default=".", help="the workflow's folder (default: here)")

    sp = command("compare", _cmd_compare, "every number of a run's figure CSVs and report.json against a reference; "
                                          "exit status 1 when one moved beyond the printed precision")
    sp.add_argument("run", metavar="RUN", help="a run's folder (its results/) or a results folder")
    sp.add_argument("reference", metavar="REFERENCE", help="a results folder (e.g. reference, kept in git) or a git "
                                                           "revision (its reference/, else its results from DVC)")
    sp.add_argument("--repo", default=".", help="the git repository a revision names (default: here)")
    sp.add_argument("--limit", type=_int, default=10, help="values listed per file that differ (default 10)")

    sp = command("simulate-s1", _cmd_simulate_s1, "S1 worst-case dataset canary audit scores", json=False)
    dp_args(sp)
    sp.add_argument("--runs", type=_int, required=True, help="runs per world (>= 1)")
    sp.add_argument("--adjacency", type=_s1_adjacency, default="substitute",
                    help="substitute (also replace-one) or add-remove (also add-or-remove-one)")
    sp.add_argument("--seed", type=_int, default=0)
    sp.add_argument("--out", required=True, help="output CSV (columns score,label)")
    sp.add_argument("--quiet", action="store_true")

    sp = command("bench", _cmd_bench, "training engine throughput vs Opacus and the matmul rate")
    sp.add_argument("--quick", action="store_true", help="fewer steps (under a minute)")
    sp.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")

    sp = command("verify", _cmd_verify, "find damaged artifacts (.npz, .json, .csv) before use")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (e.g. results data)")
    sp.add_argument("--remove", action="store_true",
                    help="delete the damaged outputs of the workflow (below data/raw, data/splits, data/features "
                         "or results of --workdir; never anything else) and print the command that rebuilds them")
    sp.add_argument("--workdir", default=".",
                    help="the workflow's working directory, whose output folders --remove may delete from "
                         "(default: the current directory)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``subaudit`` console script."""
    from subaudit.data.sources import DataError

    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"subaudit {args.command}"
    func: Callable[[argparse.Namespace], int | None] = args.func
    try:
        status = func(args)
    except ParameterError as err:
        print(f"{prog}: error: {_flag(err.name)} = {err.value!r} is invalid; "
              f"allowed: {err.allowed}", file=sys.stderr)
        return 2
    except UsageError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except AccountingRangeError as err:  # name the setting the accountant could not resolve
        given = [f"--{k.replace('_', '-')} {_listed(getattr(args, k))}" for k in _SETTING_FLAGS
                 if getattr(args, k, None) is not None]
        print(f"{prog}: error: {' '.join(given)}: {err}" if given else f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except ConfigError as err:           # a params or preset file that breaks the schema
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:               # a file or folder: named, with what the system said
        names = " -> ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
        print(f"{prog}: error: {names or 'a file'}: {err.strerror or err}", file=sys.stderr)
        return 2 if isinstance(err, _BAD_PATHS) else 1
    except (ValueError, DataError) as err:  # degenerate data, numerics out of reach, a bad download
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as err:
        extra = _EXTRAS.get((err.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"{prog}: error: needs {err.name}, which comes with subaudit's {extra} extra: "
              f"pip install 'subaudit[{extra}]'", file=sys.stderr)
        return 1
    return status or 0


#: File errors that are the input's (a path that is missing, a folder, not a folder, not
#: permitted): exit 2, as other bad input; the others (a full disk, an I/O error) exit 1.
_BAD_PATHS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError, FileExistsError)

#: Packages of the optional extras (pyproject.toml), for the message when one is missing.
_EXTRAS = {"torch": "engine", "opacus": "engine", "tqdm": "engine", "timm": "features",
           "torchvision": "features", "sentence_transformers": "features", "matplotlib": "workflow",
           "seaborn": "workflow", "yaml": "workflow", "jsonschema": "workflow"}


if __name__ == "__main__":
    sys.exit(main())
