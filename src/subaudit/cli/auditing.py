"""Audit commands: ``estimate`` (a bound from many trainings' scores), ``ceiling`` (the
worst-case canary's final-iterate ceiling) and ``one-run`` (a bound from m canaries in one
training)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from subaudit.cli.arguments import (
    Command,
    UsageError,
    dp_flags,
    emit,
    finite_float,
    integer,
    s1_adjacency,
    scores_file,
)
from subaudit.estimation import DEFAULT_ESTIMATOR, ESTIMATORS
from subaudit.estimation.guesses import GUESS_RULES
from subaudit.estimation.one_run import FDP_FAMILIES, ONE_RUN_METHODS
from subaudit.pipeline.score_files import SCORE_LAYOUTS
from subaudit.validation import ParameterError

__all__ = ["COMMANDS"]


def _estimate_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("scores", metavar="SCORES", help="audit scores: " + "; or ".join(SCORE_LAYOUTS))
    sp.add_argument("--step", type=integer, help="checkpoint of a subaudit score file (default: the last)")
    sp.add_argument("--delta", type=finite_float, required=True, help="delta in (0, 1)")
    sp.add_argument("--alpha", type=finite_float, default=0.05, help="significance level in (0, 1)")
    sp.add_argument("--estimator", choices=list(ESTIMATORS), default=DEFAULT_ESTIMATOR,
                    help="; ".join(f"{e.name}: {e.description}" for e in ESTIMATORS.values())
                    + f" (default {DEFAULT_ESTIMATOR})")


def _estimate(args: argparse.Namespace) -> None:
    from subaudit.estimation import estimate_epsilon, reversed_evidence, score_summary

    scores, labels = scores_file(args.scores, "SCORES", args.step)
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
    emit(out, args.json,
         f"epsilon >= {est.epsilon:.6g} at delta = {est.delta:g} (estimator {est.estimator}, "
         + (f"mu = {est.mu:.4g}, " if "mu" in est.details else "")
         + f"confidence {1 - est.alpha:g}); AUC {summary['auc']:.4g}, "
         f"TPR {summary['tpr_at_fpr_0.001']:.3g} at FPR 1e-3 and {summary['tpr_at_fpr_0.01']:.3g} "
         f"at 1e-2, {summary['n_positive']} runs with D and {summary['n_negative']} with D'")


def _ceiling_flags(sp: argparse.ArgumentParser) -> None:
    dp_flags(sp)
    sp.add_argument("--delta", type=finite_float, required=True, help="delta in (0, 1)")
    sp.add_argument("--adjacency", type=s1_adjacency, default="substitute",
                    help="substitute (also replace-one) or add-remove (also add-or-remove-one)")
    sp.add_argument("--every", type=integer, help="also the ceiling after every k-th step (and the last)")
    sp.add_argument("--max-terms", type=integer, default=None,
                    help="refuse a request that sums over more binomial terms than this (all checkpoints "
                         "together; the cost is linear in them, about 19,000 a second on one core; "
                         "default 20,000,000)")


def _ceiling(args: argparse.Namespace) -> None:
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
    emit({"epsilon": eps, **out}, args.json,
         "\n".join(lines + [f"epsilon = {eps:.6g}: final-iterate ceiling of the worst-case canary "
                            f"({args.adjacency}, delta = {args.delta:g})"]))


def _one_run_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--method", choices=list(ONE_RUN_METHODS), required=True,
                    help="steinke: Steinke, Nasr and Jagielski 2023; mahloujifar: Mahloujifar, Melis and "
                         "Chaudhuri 2024 (f-DP, k-ary games; the curve: --family)")
    sp.add_argument("--family", choices=list(FDP_FAMILIES), default="dp",
                    help="the trade-off curve mahloujifar tests: dp, the (epsilon, delta) curve, valid for every "
                         "mechanism (default); gdp, a test of mu-GDP (valid only for Gaussian mechanisms); "
                         "dpsgd, DP-SGD's own curve at --q and --steps (the bound: the epsilon of the "
                         "smallest noise multiplier it rejects)")
    sp.add_argument("--q", type=finite_float, help="--family dpsgd: the training's Poisson sampling rate")
    sp.add_argument("--steps", type=integer, help="--family dpsgd: the training's steps")
    sp.add_argument("--adjacency", default="add-remove",
                    help="--family dpsgd: add-remove (membership game) or substitute")
    sp.add_argument("--canaries", type=integer, help="m: canaries in the run")
    sp.add_argument("--guesses", type=integer, help="r: guesses made (the rest abstained)")
    sp.add_argument("--correct", type=integer, help="v: correct guesses")
    sp.add_argument("--scores", help="scores in one of estimate's layouts (a CSV with columns score,label, "
                                     "label 1: inserted, 0: not) instead of counts: guesses chosen from the "
                                     "scores as the papers do")
    sp.add_argument("--delta", type=finite_float, required=True,
                    help="delta in [0, 1) (steinke) or (0, 1) (mahloujifar)")
    sp.add_argument("--alpha", type=finite_float, default=0.05, help="significance level in (0, 1)")
    sp.add_argument("--k", type=integer, default=2, help="values per canary (mahloujifar k-ary games; 2 = membership)")
    pair_rules = [name for name, rule in GUESS_RULES.items() if not rule.kary]   # --scores: one score a canary
    sp.add_argument("--rule", choices=pair_rules,
                    help="with --scores, how guesses are chosen (default top-bottom): " + "; ".join(
                        f"{name}, {GUESS_RULES[name].description}" for name in pair_rules))


def _one_run_family(args: argparse.Namespace) -> tuple[str, Any]:
    """The f-DP family of ``--family`` and, for ``dpsgd``, the training's curve (``--q``, ``--steps``,
    ``--adjacency``)."""
    from subaudit.estimation.one_run import DPSGDCurve

    given = {k: getattr(args, k) for k in ("q", "steps") if getattr(args, k) is not None}
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


def _one_run(args: argparse.Namespace) -> None:
    from subaudit.estimation.guesses import default_guess_rule
    from subaudit.estimation.one_run import best_one_run_epsilon, one_run_epsilon
    from subaudit.estimation.procedures import claim_prefix
    from subaudit.estimation.roc import validate_scores_labels

    family, mechanism = _one_run_family(args)
    counts = (args.canaries, args.guesses, args.correct)
    if args.scores is not None:
        if any(c is not None for c in counts):
            raise UsageError("give either --scores or --canaries/--guesses/--correct, not both")
        scores, labels = scores_file(args.scores, "--scores")
        try:        # the label checks of `estimate`: labels 0/1 (or bool), both present
            scores, labels = validate_scores_labels(scores, labels)
        except ValueError as err:
            raise UsageError(f"--scores {args.scores}: {err} (label 1: the canary was inserted)") from None
        with _curve_in_reach(args):
            eps = best_one_run_epsilon(scores, labels.astype(bool), args.delta, args.alpha, args.method, args.k,
                                       rule=args.rule, family=family, mechanism=mechanism)
        out = {"epsilon": eps, "method": args.method, "canaries": int(scores.size),
               "rule": args.rule or default_guess_rule(args.k),
               "guesses": "searched (Bonferroni over the guess grid)"}
    else:
        if any(c is None for c in counts):
            raise UsageError("give --canaries, --guesses and --correct (or --scores FILE)")
        with _curve_in_reach(args):
            eps = one_run_epsilon(args.canaries, args.guesses, args.correct, args.delta, args.alpha, args.method,
                                  args.k, family=family, mechanism=mechanism)
        out = {"epsilon": eps, "method": args.method, "canaries": args.canaries,
               "guesses": args.guesses, "correct": args.correct}
    out.update(delta=args.delta, alpha=args.alpha, k=args.k, family=family, tests=FDP_FAMILIES[family].description)
    emit(out, args.json, f"{claim_prefix(family)} {eps:.6g} at delta = {args.delta:g} (one-run {args.method}, "
                         f"confidence {1 - args.alpha:g}; {FDP_FAMILIES[family].description})")


COMMANDS = [
    Command("estimate", "empirical lower bound on epsilon from audit scores", _estimate_flags, _estimate),
    Command("ceiling", "final-iterate ceiling: epsilon of the optimal test on the worst-case canary's cumulative "
            "gradient", _ceiling_flags, _ceiling),
    Command("one-run", "one-run audit: epsilon lower bound from m canaries in one training", _one_run_flags,
            _one_run),
]
