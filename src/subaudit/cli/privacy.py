"""Accounting commands: ``account``, ``statement``, ``calibrate``, ``gdp-epsilon``."""

from __future__ import annotations

import argparse

from subaudit.cli.arguments import (
    ADJACENCY_HELP,
    Command,
    UsageError,
    as_dict,
    dp_flags,
    emit,
    finite_float,
    integer,
)

__all__ = ["COMMANDS"]


def _history_flags(sp: argparse.ArgumentParser) -> None:
    each = "; several values: one per segment of a training whose settings changed"
    sp.add_argument("--sigma", type=finite_float, nargs="+", required=True, help="noise multiplier (> 0)" + each)
    sp.add_argument("--q", type=finite_float, nargs="+", required=True,
                    help="Poisson sampling rate in (0, 1]" + each)
    sp.add_argument("--steps", type=integer, nargs="+", required=True, help="training steps (>= 1)" + each)
    sp.add_argument("--delta", type=finite_float, required=True, help="delta in (0, 1)")


def _segments(args: argparse.Namespace) -> list[tuple[float, float, int]]:
    """(sigma, q, steps) per segment from --sigma/--q/--steps (one value is repeated)."""
    lists = {"sigma": args.sigma, "q": args.q, "steps": args.steps}
    n = max(len(v) for v in lists.values())
    for name, values in lists.items():
        if len(values) not in (1, n):
            raise UsageError(f"--sigma, --q and --steps take one value each per segment (or one "
                             f"value for all); got {len(values)} for --{name} and {n} segments")
    return [tuple(v[i] if len(v) > 1 else v[0] for v in lists.values()) for i in range(n)]


def _account_flags(sp: argparse.ArgumentParser) -> None:
    _history_flags(sp)
    sp.add_argument("--adjacency", required=True, help=ADJACENCY_HELP)


def _account(args: argparse.Namespace) -> None:
    from subaudit.accounting import epsilon_of_history

    res = epsilon_of_history(_segments(args), args.delta, args.adjacency)
    out = as_dict(res)
    out["segments"] = [list(s) for s in res.segments]
    text = f"epsilon = {res.epsilon:.6g} ({res.adjacency}, delta = {res.delta:g})"
    if res.delta_add_remove is not None:
        text += f"; from add/remove at delta' = {res.delta_add_remove:.6g}"
    if len(res.segments) > 1:
        text += f"; {len(res.segments)} segments, {res.steps} steps"
    emit(out, args.json, text)


def _statement(args: argparse.Namespace) -> None:
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
    emit(fields, args.json, "\n".join(lines))


def _calibrate_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--target-epsilon", type=finite_float, required=True, help="target epsilon (> 0)")
    dp_flags(sp, sigma=False)
    sp.add_argument("--delta", type=finite_float, required=True, help="delta in (0, 1)")
    sp.add_argument("--adjacency", required=True, help=ADJACENCY_HELP)


def _calibrate(args: argparse.Namespace) -> None:
    from subaudit.accounting import calibrate_sigma, epsilon

    sigma = calibrate_sigma(args.target_epsilon, args.q, args.steps, args.delta, args.adjacency)
    res = epsilon(sigma, args.q, args.steps, args.delta, args.adjacency)
    out = {"target_epsilon": args.target_epsilon, "q": args.q, "steps": args.steps,
           **as_dict(res), "sigma": sigma}
    emit(out, args.json, f"sigma = {sigma:.6g} gives epsilon = {res.epsilon:.6g} "
                         f"({res.adjacency}, delta = {res.delta:g})")


def _gdp_epsilon_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--mu", type=finite_float, required=True, help="GDP parameter mu (> 0)")
    sp.add_argument("--delta", type=finite_float, required=True, help="delta in (0, 1)")


def _gdp_epsilon(args: argparse.Namespace) -> None:
    from subaudit.accounting.gdp import gdp_epsilon

    eps = gdp_epsilon(args.mu, args.delta)
    emit({"epsilon": eps, "mu": args.mu, "delta": args.delta}, args.json,
         f"epsilon = {eps:.6g} (mu = {args.mu:g}-GDP at delta = {args.delta:g})")


COMMANDS = [
    Command("account", "epsilon of Poisson-subsampled Gaussian DP-SGD", _account_flags, _account),
    Command("statement", "add/remove, substitute and group-privacy epsilon side by side, with the assumptions: "
            "a statement to quote", _history_flags, _statement),
    Command("calibrate", "noise multiplier reaching a target epsilon", _calibrate_flags, _calibrate),
    Command("gdp-epsilon", "epsilon at delta of a mu-GDP mechanism", _gdp_epsilon_flags, _gdp_epsilon),
]
