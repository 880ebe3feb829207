"""Tidy tables behind the workflow's figures and report: audit summaries beside the
accountants' values (computed by :mod:`subaudit.accounting.grids`).

Pure functions from numbers to records/DataFrames; the workflow scripts only read
inputs, call these and write outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from subaudit.estimation.ceilings import final_iterate_epsilon
from subaudit.estimation import estimate_epsilon, finite_r_ceiling
from subaudit.estimation.one_run import FDP_FAMILIES
from subaudit.estimation.procedures import GAMES, PROCEDURES, bound_label
from subaudit.scenarios import SCENARIOS
from subaudit.scenarios.deep_canaries import DEEP_KINDS, SCORES
from subaudit.scenarios.deep_cases import CASES

# Series names used in tables and legends.
EPS_S = "eps_S (accounting)"
EPS_GROUP = "eps_S (group privacy)"
EPS_AR = "eps_AR (accounting)"
CEILING = "final-iterate ceiling ({adjacency})"
FINITE_R = "finite-R ceiling ({estimator} estimator)"


def mean_se(frame: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    """Mean, count and standard error of the mean (sample sd / sqrt(n); NaN for n = 1) by keys."""
    out = frame.groupby(keys)[value].agg(["mean", "std", "count"]).reset_index()
    out["se"] = out["std"] / np.sqrt(out["count"])
    return out.drop(columns="std")


#: What an audit row of a figure table holds beside its headline ``epsilon`` (the valid bound on
#: all its runs, the repeats pooled): the repeats' mean, its standard error, their range
#: (``low``, ``high``), their count and the pooled number of runs.
SPREAD = ("mean", "se", "low", "high", "n_repeats", "n_runs")
#: A natural-data audit's own bounds, repeat by repeat in repeat order ("2.9;3.1;3.0"): settings
#: that share their random numbers (the same repeat at another C, T or lr) are compared
#: repeat by repeat.
REPEATS, REPEAT_SEP = "repeats", ";"


def repeat_bounds(cell: Any) -> list[float]:
    """The bounds a :data:`REPEATS` cell holds, in repeat order."""
    return [float(x) for x in str(cell).split(REPEAT_SEP)]


def repeat_spread(estimates: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per ``keys``: the repeats' mean bound, its standard error (sample sd / sqrt(n); NaN for
    one repeat), their range (``low``, ``high``) and their count ``n_repeats``."""
    reps = estimates.groupby(keys)["epsilon"].agg(["mean", "std", "count", "min", "max"]).reset_index()
    reps["se"] = reps["std"] / np.sqrt(reps["count"])
    return reps.rename(columns={"count": "n_repeats", "min": "low", "max": "high"}).drop(columns="std")


def audit_summary(estimates: pd.DataFrame, pooled: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per ``keys``: the pooled audit's bound (``epsilon``; ``pooled`` holds the records of the
    repeats pooled into one audit, :func:`subaudit.pipeline.score_files.pool_repeats`) beside
    the repeats' own bounds (:data:`SPREAD`).  Every group of repeats needs its pooled
    estimate (ValueError)."""
    reps = repeat_spread(estimates, keys)
    pooled = pooled.assign(n_runs=pooled["n_positive"] + pooled["n_negative"])
    out = reps.merge(pooled[keys + ["epsilon", "n_runs"]], on=keys, how="left", validate="one_to_one")
    if out["epsilon"].isna().any():
        missing = out.loc[out["epsilon"].isna(), keys].to_dict("records")
        raise ValueError(f"no pooled estimate for {missing[:3]}")
    return out


def fig2_table(calibrations: Iterable[Mapping[str, Any]], estimates: Iterable[Mapping[str, Any]],
               pooled: Iterable[Mapping[str, Any]], adjacency: str) -> pd.DataFrame:
    """Tidy Fig 2 table: accountant values, the final-iterate ceiling of the S1 canary
    (:mod:`subaudit.estimation.ceilings`, the canaries' ``adjacency``) and the audit.

    ``estimates`` are the repeats' records (keys q, target_epsilon, repeat, step, estimator,
    epsilon) and ``pooled`` those of the repeats pooled into one audit; the
    final-step rows are used.  An audit's ``epsilon`` is its pooled bound, beside the repeats'
    :data:`SPREAD` (the figure draws their range).
    """
    cal = pd.DataFrame(list(calibrations))
    rows = []
    for rec in cal.itertuples(index=False):
        base = {"q": rec.q, "target_epsilon": rec.target_epsilon, "sigma": rec.sigma,
                "steps": rec.steps, "delta": rec.delta}
        ceiling = final_iterate_epsilon(rec.sigma, rec.q, rec.steps, rec.delta, adjacency)
        for series, value in ((EPS_S, rec.eps_substitute), (EPS_GROUP, rec.eps_group),
                              (EPS_AR, rec.eps_add_remove),
                              (CEILING.format(adjacency=adjacency), ceiling)):
            rows.append({**base, "series": series, "estimator": "", "adjacency": "",
                         "epsilon": value, **_exact(value)})
    est = pd.DataFrame(list(estimates))
    if not est.empty:
        cells = ["q", "target_epsilon"]
        summary = audit_summary(_final_step(est, cells), _final_step(pd.DataFrame(list(pooled)), cells),
                                [*cells, "estimator"])
        for rec in summary.to_dict("records"):
            match = cal[(cal.q == rec["q"]) & (cal.target_epsilon == rec["target_epsilon"])].iloc[0]
            rows.append({"q": rec["q"], "target_epsilon": rec["target_epsilon"], "sigma": match.sigma,
                         "steps": match.steps, "delta": match.delta,
                         "series": f"eps audit ({rec['estimator']} estimator, {adjacency} canaries)",
                         "estimator": rec["estimator"], "adjacency": adjacency,
                         **{k: rec[k] for k in ("epsilon", *SPREAD)}})
    table = pd.DataFrame(rows)
    table[["n_repeats", "n_runs"]] = table[["n_repeats", "n_runs"]].astype(int)
    return table.sort_values(["q", "target_epsilon", "series"], ascending=[False, True, True],
                             ignore_index=True)


def _final_step(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The rows of each group of ``keys`` at its last step."""
    return frame[frame["step"] == frame.groupby(keys)["step"].transform("max")]


def _exact(value: float) -> dict[str, Any]:
    """The :data:`SPREAD` columns of an accountant's (exact) value."""
    return {"mean": value, "se": 0.0, "low": value, "high": value, "n_repeats": 0, "n_runs": 0}


def figA5_table(rows: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate the per-q ratio rows of Fig A5 into one tidy table."""
    table = pd.concat(list(rows), ignore_index=True)
    return table.sort_values(["q", "sigma"], ascending=[False, True], ignore_index=True)


# --------------------------------------------------------------------------- natural-data audits

def natural_table(step_acc: pd.DataFrame, estimates: Iterable[Mapping[str, Any]],
                  pooled: Iterable[Mapping[str, Any]], panel: str = "q") -> pd.DataFrame:
    """Tidy table of a natural-data figure: accountants and audits per (panel, step).

    ``estimates`` are the repeats' records with keys scenario, q, repeat, step, estimator,
    epsilon and the ``panel`` knob (q for Figs 3, A6, 4; clip, steps or lr for an ablation,
    whose ``step_acc`` then carries that column too); ``pooled`` are the same audits with
    their repeats pooled into one audit.  An audit's ``epsilon`` is its pooled
    bound (valid for a valid estimator, on all its runs), beside the repeats' :data:`SPREAD`:
    their mean and its standard error (for t intervals) and their range (the figures' bands).
    """
    acc_rows = step_acc.to_dict("records")
    rows = []
    for rec in acc_rows:
        for series, value in ((EPS_S, rec["eps_substitute"]), (EPS_AR, rec["eps_add_remove"])):
            rows.append({panel: rec[panel], "q": rec["q"], "step": rec["step"], "series": series,
                         "scenario": "", "estimator": "", "epsilon": value, **_exact(value),
                         "sigma": rec["sigma"], "delta": rec["delta"]})
    est = pd.DataFrame(list(estimates))
    if not est.empty:
        lookup = {(r[panel], r["step"]): r for r in acc_rows}
        keys = list(dict.fromkeys([panel, "step", "scenario", "estimator"]))
        each = est.sort_values("repeat").groupby(keys)["epsilon"].agg(lambda v: REPEAT_SEP.join(f"{x:.10g}" for x in v))
        for rec in audit_summary(est, pd.DataFrame(list(pooled)), keys).to_dict("records"):
            acc = lookup[(rec[panel], rec["step"])]
            rows.append({panel: rec[panel], "q": acc["q"], "step": rec["step"],
                         "scenario": rec["scenario"], "series": SCENARIOS[rec["scenario"]].title,
                         "estimator": rec["estimator"], **{k: rec[k] for k in ("epsilon", *SPREAD)},
                         REPEATS: each[tuple(rec[k] for k in keys)], "sigma": acc["sigma"], "delta": acc["delta"]})
    table = pd.DataFrame(rows)
    table[["n_repeats", "n_runs"]] = table[["n_repeats", "n_runs"]].astype(int)
    return table.sort_values([panel, "series", "estimator", "step"],
                             ascending=[panel != "q", True, True, True], ignore_index=True)


def runs_table(final_acc: pd.DataFrame, audits: Iterable[Mapping[str, Any]],
               runs: Sequence[int], delta: float, alpha: float,
               estimators: Sequence[str]) -> pd.DataFrame:
    """Tidy table of Fig 5: final-step epsilon against R' per (q, scenario, estimator).

    ``audits`` are records with q, scenario, repeat and ``scores`` (final step, runs in
    index order, so the first R' runs hold R'/2 runs per world) and ``bits``; each audit
    is estimated on its first R' runs (a run's numbers do not depend on R, so this is the
    audit an R'-run budget gives).  Beside them, per q: eps_S, eps_AR and the final-iterate
    ceiling (substitute) of ``final_acc`` (the accountants at the final step), and per R'
    the finite-R ceiling of each estimator (:func:`subaudit.estimation.finite_r_ceiling`).
    An audit's ``epsilon`` here is the repeats' mean (what an audit of R' runs gives), beside
    their :data:`SPREAD`.
    """
    finite = {(r, name): finite_r_ceiling(r // 2, r - r // 2, delta, alpha, name)
              for r in runs for name in estimators}
    rows = []
    for acc in final_acc.to_dict("records"):
        base = {"q": acc["q"], "step": acc["step"], "sigma": acc["sigma"], "delta": delta}
        ceiling = final_iterate_epsilon(acc["sigma"], acc["q"], int(acc["step"]), delta, "substitute")
        for r in runs:
            for series, value in ((EPS_S, acc["eps_substitute"]), (EPS_AR, acc["eps_add_remove"]),
                                  (CEILING.format(adjacency="substitute"), ceiling)):
                rows.append({**base, "runs": int(r), "series": series, "scenario": "",
                             "estimator": "", "epsilon": value, **_exact(value)})
            for name in estimators:
                rows.append({**base, "runs": int(r), "series": FINITE_R.format(estimator=name),
                             "scenario": "", "estimator": name, "epsilon": finite[(r, name)],
                             **_exact(finite[(r, name)])})
    records = []
    for audit in audits:
        for r in runs:
            scores, bits = np.asarray(audit["scores"])[:r], np.asarray(audit["bits"])[:r]
            for name in estimators:
                est = estimate_epsilon(scores, bits, delta, alpha, name)
                records.append({"q": audit["q"], "scenario": audit["scenario"], "runs": int(r),
                                "estimator": name, "epsilon": est.epsilon})
    if records:
        summary = repeat_spread(pd.DataFrame(records), ["q", "scenario", "runs", "estimator"])
        acc_by_q = {a["q"]: a for a in final_acc.to_dict("records")}
        for rec in summary.to_dict("records"):
            acc = acc_by_q[rec["q"]]
            rows.append({"q": rec["q"], "step": acc["step"], "sigma": acc["sigma"], "delta": delta,
                         "runs": rec["runs"], "series": SCENARIOS[rec["scenario"]].title,
                         "scenario": rec["scenario"], "estimator": rec["estimator"],
                         "epsilon": rec["mean"], **{k: rec[k] for k in SPREAD[:-1]}, "n_runs": rec["runs"]})
    table = pd.DataFrame(rows)
    table[["n_repeats", "n_runs"]] = table[["n_repeats", "n_runs"]].astype(int)
    return table.sort_values(["q", "series", "estimator", "runs"], ascending=[False, True, True, True],
                             ignore_index=True)


def utility_table(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Fig A1 table: test accuracy per (scenario, world, step), mean and s.e. over runs."""
    out = mean_se(pd.DataFrame(list(records)), ["scenario", "world", "step"], "accuracy")
    return out.rename(columns={"mean": "accuracy", "count": "n_runs"})


# --------------------------------------------------------------------------- one-run audits

def one_run_table(step_acc: pd.DataFrame, one_run: Iterable[Mapping[str, Any]],
                  r_run: Iterable[Mapping[str, Any]], compare_with: Mapping[str, str],
                  estimator: str) -> pd.DataFrame:
    """Tidy table of the one-run figure, per (canary kind, q) at the final step: the one-run
    epsilon per method (mean and s.e. over repeats), the R-run audit of the same canary family
    (scenario ``compare_with[kind]``, ``estimator``), the final-iterate ceiling (substitute,
    :mod:`subaudit.estimation.ceilings`) and the accountants; with each audit's cost in trainings.
    Wall time is not a column: the table is versioned and must reproduce bit for bit (the
    seconds are in the one-run jobs' logs and benchmarks)."""
    acc = step_acc[step_acc["step"] == step_acc.groupby("q")["step"].transform("max")]
    one = pd.DataFrame(list(one_run))
    est = pd.DataFrame(list(r_run))
    rows = []
    for kind, scenario in compare_with.items():
        for rec in acc.itertuples(index=False):
            base = {"kind": kind, "q": rec.q, "step": rec.step, "sigma": rec.sigma, "delta": rec.delta}
            ceiling = final_iterate_epsilon(rec.sigma, rec.q, int(rec.step), rec.delta, "substitute")
            for series, value in ((EPS_S, rec.eps_substitute), (EPS_AR, rec.eps_add_remove),
                                  (CEILING.format(adjacency="substitute"), ceiling)):
                rows.append({**base, "series": series, "method": "", "epsilon": value, "se": 0.0,
                             "n_repeats": 0, "trainings": 0})
            mine = one[(one["kind"] == kind) & (one["q"] == rec.q)] if not one.empty else one
            for (method, family), group in (mine.groupby(["method", "family"]) if not mine.empty else ()):
                test = "" if family == "dp" else f", {FDP_FAMILIES[family].label}"
                rows.append({**base, "series": f"one-run audit ({method}{test}, m = {int(group['canaries'].iloc[0])})",
                             "method": method, "epsilon": group["epsilon"].mean(),
                             "se": group["epsilon"].std(ddof=1) / np.sqrt(len(group)),
                             "n_repeats": len(group), "trainings": 1})
            if not est.empty:
                final = est[(est["q"] == rec.q) & (est["scenario"] == scenario)
                            & (est["estimator"] == estimator)]
                final = final[final["step"] == final["step"].max()]
                if len(final):
                    rows.append({**base, "series": f"R-run audit ({scenario}, {estimator} estimator)",
                                 "method": estimator, "epsilon": final["epsilon"].mean(),
                                 "se": final["epsilon"].std(ddof=1) / np.sqrt(len(final)),
                                 "n_repeats": len(final),
                                 "trainings": int(final["n_positive"].iloc[0] + final["n_negative"].iloc[0])})
    table = pd.DataFrame(rows)
    return table.sort_values(["kind", "q", "series"], ascending=[True, False, True], ignore_index=True)


# --------------------------------------------------------------------------- deep-network audits

#: Columns of the deep-network audits' figure CSV, one row per (case, game, repeat, kind,
#: score, procedure): the bound (``family``: the trade-off curve an f-DP procedure tests,
#: :data:`subaudit.estimation.one_run.FDP_FAMILIES`), the most m canaries can show, the accountants' epsilon of
#: that training (``reference``: the game's adjacency), the ceiling (gradient canaries), and
#: the audit's cost in trainings (one: a one-run audit).
DEEP_COLUMNS = ("case", "game", "adjacency", "group", "repeat", "kind", "score", "procedure", "family", "bonferroni",
                "m", "epsilon",
                "perfect",
                "reference", "eps_add_remove", "eps_substitute", "ceiling", "test_accuracy", "sample_rate",
                "steps", "noise_multiplier", "trainings")


def deep_table(audits: Iterable[Iterable[Mapping[str, Any]]]) -> pd.DataFrame:
    """Tidy table of the deep-network audits from each audit's rows
    (:func:`subaudit.integrations.deep.audit_rows`): one training each."""
    rows = [{**r, "trainings": 1} for audit in audits for r in audit]
    table = pd.DataFrame(rows, columns=list(DEEP_COLUMNS))
    orders = {"case": CASES, "game": GAMES, "procedure": tuple(PROCEDURES), "kind": tuple(DEEP_KINDS),
              "score": (*SCORES, "update")}

    def rank(column: pd.Series) -> pd.Series:  # registry order, unknown names last
        order = orders.get(column.name)
        return column if order is None else column.map({v: i for i, v in enumerate(order)}).fillna(len(order))

    return table.sort_values(["case", "game", "procedure", "kind", "score", "repeat"], key=rank, ignore_index=True)


def deep_view(table: pd.DataFrame, score: str) -> pd.DataFrame:
    """The rows a figure or summary of the deep audits shows: the input kinds read by ``score``
    and the white-box kinds by each of their scores, a white-box kind read by another score than
    its ``update`` named with it ("gradient (residual)"), and a bound of a family that assumes
    the mechanism named with its assumption ("gradient [if DP-SGD]"), so that no two scores or
    families are pooled."""
    white = table["kind"].map(lambda k: k in DEEP_KINDS and DEEP_KINDS[k].white_box)
    mine = table[(table["score"] == score) | white].copy()
    other = white[mine.index] & ~mine["score"].str.startswith("update")
    mine.loc[other, "kind"] = mine.loc[other, "kind"] + " (" + mine.loc[other, "score"] + ")"
    tags = mine["family"].map(lambda f: FDP_FAMILIES[f].tag if f in FDP_FAMILIES else f)
    assumed = tags != ""
    mine.loc[assumed, "kind"] = mine.loc[assumed, "kind"] + " [" + tags[assumed] + "]"
    return mine


def deep_summary(table: pd.DataFrame, score: str) -> pd.DataFrame:
    """Table 2 of the canary-optimisation paper, per game: one row per (procedure, family, kind),
    average and median over audits of each case, beside the most its m canaries can show (every
    guess right: ``cap``), the final-iterate ceiling (gradient canaries) and the accountant's
    epsilon (input kinds read ``score``; gradient canaries their update)."""
    mine = deep_view(table, score)
    out = mine.groupby(["game", "procedure", "family", "kind", "case"], sort=False).agg(
        avg=("epsilon", "mean"), med=("epsilon", "median"), audits=("epsilon", "size"),
        cap=("perfect", "max"), ceiling=("ceiling", "mean"), reference=("reference", "mean")).reset_index()
    corrected = mine.groupby("procedure")["bonferroni"].first()
    out["family"] = [bound_label(f, bool(corrected[p])) for f, p in zip(out["family"], out["procedure"])]
    wide = out.pivot_table(index=["game", "procedure", "family", "kind"], columns="case",
                           values=["avg", "med", "cap", "ceiling", "reference", "audits"], sort=False)
    wide.columns = [f"{case} {stat}" for stat, case in wide.columns]
    cases = list(dict.fromkeys(out["case"]))
    ordered = [f"{c} {s}" for c in cases for s in ("avg", "med", "cap", "ceiling", "reference", "audits")]
    wide = wide.reindex(columns=ordered)
    for c in cases:
        wide[f"{c} audits"] = wide[f"{c} audits"].astype("Int64")  # a count, not a float
    return wide.reset_index()
