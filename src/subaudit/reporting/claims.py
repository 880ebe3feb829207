"""The paper's claims, and ours beyond it, each judged from the numbers of this run's
figures: a registry.

A :class:`Claim` reads the figures' tidy tables (the CSVs beside the figures) and returns
a :class:`Verdict`: ``supported``, ``refuted`` or ``cannot tell``, with the numbers that
decide it and the rule, stated once in the claim.  No verdict is written by hand.

Statistical rules.  An audit's headline is its *pooled* bound: the valid estimator on all
its runs, the repeats pooled into one audit (they train the same pair from independent seeds,
so their runs are one larger audit of the same mechanism).  It is *above* a reference when the
pooled bound exceeds it (a statement about epsilon at the estimator's confidence), *below*
when the 95% t interval (n - 1 degrees of freedom) of the repeats' mean bound ends under it
(a statement about the audit), and *within error* otherwise; with one repeat an audit that is
not above cannot tell.  Two audits (scenarios, knob values) are compared by the Welch t
interval of the difference of their repeats' means, or, where they share their random numbers
(two values of C, T or lr), by the paired t interval of their repeats' differences; with one
repeat on either side, that comparison cannot tell.  Accountant values are exact (no margin).  Adding a claim is a
function here and its entry in :data:`CLAIMS` (with the columns it reads from each figure),
with a test that changes its numbers and its verdict.

A claim whose figures are not in the run, or lack a column it reads, cannot tell, and says
which; the columns are checked before its function runs, so any error inside the function
(a misspelt column included) is a bug that fails the report, never a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from subaudit.reporting.tables import EPS_AR, EPS_GROUP, EPS_S, REPEATS, SPREAD, repeat_bounds
from subaudit.reporting.compare import PRINTED

__all__ = ["BASELINES", "CLAIMS", "CLAIM_SCORE", "FACTORS", "GAP_CASE", "INPUT_SCENARIOS", "LEVEL", "OPTIMISED",
           "PAPER_SCENARIOS", "STATUS_CODES", "Claim", "Evidence", "Verdict", "compare", "difference", "final_audits",
           "format_audit", "judge_all", "paired_difference", "paired_t"]

#: Verdicts and their codes in the metrics file (``dvc metrics diff`` compares numbers).
STATUS_CODES = {"supported": 1, "cannot tell": 0, "refuted": -1}

#: The paper's scenarios, which its claims are about (scenarios beyond it, S6 and S7, are shown in
#: the figures and tables but judged by none of its claims), and its input-space canaries.
PAPER_SCENARIOS = ("S2", "S3", "S4", "S5")
#: Confidence of the t intervals over repeats.
LEVEL = 0.95
INPUT_SCENARIOS = ("S3", "S4", "S5")


@dataclass(frozen=True)
class Evidence:
    """What the claims read: the figures' tables by figure name, the estimator the verdicts
    use (a valid one), the natural-data figures with whether their model is trained from
    scratch, the ablation figures by ablated knob, and the ablated experiment's own value
    of each knob (the base the learning-rate ablation departs from)."""

    tables: Mapping[str, pd.DataFrame]
    estimator: str
    natural: Mapping[str, bool]
    ablations: Mapping[str, str] = field(default_factory=dict)
    base: Mapping[str, float] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame:
        """The table of figure ``name`` (KeyError names what is there)."""
        if name not in self.tables:
            raise KeyError(f"figure {name!r} is not among {sorted(self.tables)}")
        return self.tables[name]


@dataclass(frozen=True)
class Verdict:
    """One claim's verdict, the numbers that decide it and a sentence saying why."""

    claim: int
    status: str
    reason: str
    numbers: Mapping[str, float] = field(default_factory=dict)

    @property
    def code(self) -> int:
        return STATUS_CODES[self.status]


@dataclass(frozen=True)
class Claim:
    """A claim of the paper, the rule that judges it, the function applying the rule, the
    paper's figures it is about, and ``reads``: the figures of a run it reads, each with the
    columns it reads there (any of them the run has)."""

    number: int
    text: str
    rule: str
    judge: Callable[[Evidence], tuple[str, str, dict[str, float]]]
    figures: tuple[str, ...]
    reads: Callable[[Evidence], Mapping[str, tuple[str, ...]]]
    beyond: bool = False

    def missing(self, evidence: Evidence) -> str | None:
        """Why this run cannot judge the claim (none of its figures; a column one lacks), or None."""
        reads = self.reads(evidence)
        present = [f for f in reads if f in evidence.tables]
        if not present:
            return "not in this run: no figure " + " or ".join(reads or self.figures)
        gaps = [f"{f} lacks {', '.join(c for c in reads[f] if c not in evidence.tables[f].columns)}"
                for f in present if not set(reads[f]) <= set(evidence.tables[f].columns)]
        return "not in this run: " + "; ".join(gaps) if gaps else None


def _t(level: float, df: float) -> float:
    return float(stats.t.ppf(0.5 + level / 2, df))


def compare(audit: Mapping[str, Any], reference: float, level: float = LEVEL) -> str:
    """'above' ``reference`` when the audit's pooled valid bound (``epsilon``) exceeds it;
    'below' when the t interval at ``level`` of its repeats' mean bound (``mean``, ``se``,
    ``n_repeats``) ends under it; else 'within error', or 'unknown' with one repeat."""
    if audit["epsilon"] > reference:
        return "above"
    n = int(audit["n_repeats"])
    if n < 2 or not np.isfinite(audit["se"]):
        return "unknown"
    if audit["mean"] + _t(level, n - 1) * audit["se"] < reference:
        return "below"
    return "within error"


def difference(a: Mapping[str, Any], b: Mapping[str, Any], level: float = LEVEL) -> tuple[float, float, float]:
    """Mean bound of audit ``a`` minus that of ``b`` over their repeats, with its Welch t
    interval at ``level`` (independent repeats; NaN bounds when either has one repeat)."""
    diff = float(a["mean"] - b["mean"])
    na, nb = int(a["n_repeats"]), int(b["n_repeats"])
    if na < 2 or nb < 2:
        return diff, float("nan"), float("nan")
    va, vb = float(a["se"]) ** 2, float(b["se"]) ** 2
    if va + vb == 0.0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    half = _t(level, df) * float(np.sqrt(va + vb))
    return diff, diff - half, diff + half


def _sign(interval: tuple[float, float, float]) -> str:
    """'above' 0 when the interval's low end is, 'below' when its high end is, else
    'within error' ('unknown' without an interval)."""
    _, lo, hi = interval
    if not np.isfinite(lo):
        return "unknown"
    return "above" if lo > 0 else "below" if hi < 0 else "within error"


def _interval(interval: tuple[float, float, float]) -> str:
    diff, lo, hi = interval
    if not np.isfinite(lo):
        return f"{diff:{PRINTED}} (one repeat: no interval)"
    return f"{diff:{PRINTED}} [{lo:{PRINTED}}, {hi:{PRINTED}}]"


def final_audits(table: pd.DataFrame, estimator: str, panel: str = "q") -> pd.DataFrame:
    """One row per (panel value, scenario) at the final step: the audit of ``estimator``
    (its pooled bound ``epsilon`` and the repeats' spread) beside eps_S and eps_AR of that
    step and sigma."""
    last = table[table["step"] == table.groupby(panel)["step"].transform("max")]
    audits = last[(last["estimator"] == estimator) & (last["scenario"].fillna("") != "")]
    acc = last[last["series"].isin([EPS_S, EPS_AR])].pivot_table(
        index=panel, columns="series", values="epsilon")
    columns = list(dict.fromkeys([panel, "q", "step", "scenario", "epsilon", *SPREAD, "sigma",
                                  *([REPEATS] if REPEATS in audits else [])]))
    out = audits[columns].copy()
    out["se"] = np.where(out["n_repeats"] > 1, out["se"], np.nan)
    out["eps_S"] = out[panel].map(acc[EPS_S])
    out["eps_AR"] = out[panel].map(acc[EPS_AR])
    return out.reset_index(drop=True)


def _fmt(x: float) -> str:
    return "n/a" if not np.isfinite(x) else f"{x:{PRINTED}}"


def format_audit(audit: Mapping[str, Any], headline: str = "epsilon") -> str:
    """An audit as text: its ``headline`` bound (the pooled one; ``mean`` for Fig 5's audits
    of R' runs), then the range of its repeats' own bounds ("3.2 (repeats 2.9–3.1)"), or
    "(1 repeat)"."""
    eps = audit[headline]
    if not np.isfinite(eps):
        return "n/a"
    if int(audit["n_repeats"]) < 2:
        return f"{eps:{PRINTED}} (1 repeat)"
    return f"{eps:{PRINTED}} (repeats {audit['low']:{PRINTED}}–{audit['high']:{PRINTED}})"


# --------------------------------------------------------------------------- the claims


def _s1(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    t = ev.table("fig2")
    audit = t[t["estimator"] == ev.estimator]
    q_max = float(t["q"].max())
    rows, above, below, track = [], 0, 0, True
    for q, sub in t.groupby("q"):
        acc = sub[sub["series"].isin([EPS_S, EPS_AR])].pivot_table(
            index="target_epsilon", columns="series", values="epsilon")
        a = audit[audit["q"] == q].set_index("target_epsilon").sort_index()
        if q == q_max:
            for target, r in a.iterrows():
                c = compare(r, acc.loc[target, EPS_AR])
                above += c == "above"
                below += c == "below"
                rows.append(f"target {target:g}: {format_audit(r)} "
                            f"vs eps_AR {_fmt(acc.loc[target, EPS_AR])}")
        track &= bool(np.all(np.diff(a["epsilon"].to_numpy()) > 0))
    share = audit[audit["q"] == q_max].set_index("target_epsilon")["epsilon"] / \
        t[(t["q"] == q_max) & (t["series"] == EPS_S)].set_index("target_epsilon")["epsilon"]
    n = int((audit["q"] == q_max).sum())
    numbers = {"q": q_max, "targets": n, "above_eps_AR": above, "below_eps_AR": below,
               "min_share_of_eps_S": float(share.min())}
    detail = f"q = {q_max:g}: " + "; ".join(rows)
    if n and above == n and track and share.min() >= 0.5:
        return "supported", f"every target's audit is above eps_AR and rises with eps_S, reaching " \
                            f"at least {share.min():.0%} of it ({detail})", numbers
    if n and below == n:
        return "refuted", f"every audit is below eps_AR ({detail})", numbers
    return "cannot tell", f"{above} of {n} audits above eps_AR, rising with eps_S: {track}, " \
                          f"least share of eps_S {share.min():.0%} ({detail})", numbers


def _group(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    t = ev.table("fig2")
    acc = t[t["series"].isin([EPS_S, EPS_GROUP])].pivot_table(
        index=["q", "target_epsilon"], columns="series", values="epsilon")
    ratio = acc[EPS_GROUP] / acc[EPS_S]
    numbers = {"cells": len(ratio), "tighter": int((ratio > 1).sum()),
               "min_group_over_substitute": float(ratio.min()),
               "max_group_over_substitute": float(ratio.max())}
    text = (f"eps_S(group) / eps_S(accountant) over {len(ratio)} (q, target) cells: "
            f"{ratio.min():{PRINTED}} to {ratio.max():{PRINTED}}")
    if (ratio > 1).all():
        return "supported", text, numbers
    return "refuted", text + f"; the accountant is not tighter in {int((ratio <= 1).sum())} cells", numbers


def _natural(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    figs = [f for f, scratch in ev.natural.items() if not scratch and f in ev.tables]
    if not figs:
        return "cannot tell", "no fine-tuned experiment in this run", {}
    statuses, parts, numbers = [], [], {}
    for name in figs:
        f = final_audits(ev.table(name), ev.estimator)
        top = f[(f["q"] == f["q"].max()) & f["scenario"].isin(PAPER_SCENARIOS)].set_index("scenario")
        if "S2" not in top.index:
            statuses.append("cannot tell")
            parts.append(f"{name}: no S2 audit")
            continue
        s2 = top.loc["S2"]
        vs_ar = compare(s2, s2["eps_AR"])
        others = top.drop(index="S2")
        beaten = [s for s, r in others.iterrows() if _sign(difference(r, s2)) == "above"]
        highest = bool((others["epsilon"] <= s2["epsilon"]).all())
        numbers.update({f"{name}_q": float(s2["q"]), f"{name}_S2": float(s2["epsilon"]),
                        f"{name}_eps_AR": float(s2["eps_AR"]), f"{name}_eps_S": float(s2["eps_S"])})
        parts.append(f"{name}, q = {s2['q']:g}: S2 {format_audit(s2)} vs eps_AR {_fmt(s2['eps_AR'])} "
                     f"({vs_ar}); others " + ", ".join(f"{s} {format_audit(r)}" for s, r in others.iterrows()))
        if vs_ar == "below" or beaten:
            statuses.append("refuted")
        elif vs_ar == "above" and highest:
            statuses.append("supported")
        else:
            statuses.append("cannot tell")
    return _combine(statuses), "; ".join(parts), numbers


def _scratch(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    figs = [f for f, scratch in ev.natural.items() if scratch and f in ev.tables]
    if not figs:
        return "cannot tell", "no experiment trained from scratch in this run", {}
    statuses, parts, numbers = [], [], {}
    for name in figs:
        f = final_audits(ev.table(name), ev.estimator)
        inputs = f[f["scenario"].isin(INPUT_SCENARIOS)]
        exceed = [f"{r['scenario']} at q = {r['q']:g}" for _, r in inputs.iterrows()
                  if compare(r, r["eps_AR"]) == "above"]
        s2 = f[(f["scenario"] == "S2") & (f["q"] == f["q"].max())]
        s2_vs = compare(s2.iloc[0], s2["eps_AR"].iloc[0]) if len(s2) else "none"
        numbers.update({f"{name}_input_above_eps_AR": len(exceed),
                        f"{name}_max_input_over_eps_AR": float((inputs["epsilon"] / inputs["eps_AR"]).max())})
        if len(s2):
            numbers[f"{name}_S2"] = float(s2["epsilon"].iloc[0])
            numbers[f"{name}_S2_eps_AR"] = float(s2["eps_AR"].iloc[0])
        parts.append(f"{name}: input canaries above eps_AR: {', '.join(exceed) or 'none'}; "
                     + "; ".join(f"{r['scenario']} q = {r['q']:g} {format_audit(r)} vs eps_AR {_fmt(r['eps_AR'])}"
                                 for _, r in inputs.iterrows())
                     + (f"; S2 at q = {s2['q'].iloc[0]:g}: {format_audit(s2.iloc[0])} vs eps_AR "
                        f"{_fmt(s2['eps_AR'].iloc[0])} ({s2_vs})" if len(s2) else ""))
        if exceed:
            statuses.append("refuted")
        elif s2_vs == "above":
            statuses.append("supported")
        else:
            statuses.append("cannot tell")
    return _combine(statuses), "; ".join(parts), numbers


#: Claim 5's factors: (name, the knob, where the strong end is: "high", "low" or "base", and
#: whether its two ends share their random numbers). The workflow's seeds hold q but not C, T or
#: lr (subaudit.pipeline.settings.SEED_KEYS; a test holds the two together), so a repeat at one
#: end of C, T or lr trains on the same draws as that repeat at the other: those ends are
#: compared repeat by repeat (a paired t interval), q's by Welch's.
FACTORS = (("q falls", "q", "high", False), ("C grows", "clip", "low", True), ("T grows", "steps", "low", True),
           ("lr changes", "lr", "base", True))


def paired_difference(a: Mapping[str, Any], b: Mapping[str, Any], level: float = LEVEL) -> tuple[float, float, float]:
    """Audit ``a``'s bound minus ``b``'s repeat by repeat (their :data:`REPEATS`, over the
    repeats both have), the mean and its paired t interval at ``level``."""
    x, y = repeat_bounds(a[REPEATS]), repeat_bounds(b[REPEATS])
    n = min(len(x), len(y))
    return paired_t(np.subtract(x[:n], y[:n]), level)


def _weakens(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    """Claim 5, per factor: for each of S3-S5 the input canary's mean bound at the strong end of
    the knob minus that at the weak end, with its t interval (paired by repeat where the ends
    share their random numbers, else Welch's); the factor's verdict by the majority of the
    scenarios."""
    fine = [f for f, s in ev.natural.items() if not s]
    tables = {"q": ev.table(fine[0]) if fine else None,
              **{k: ev.table(ev.ablations[k]) for k in ("clip", "steps", "lr")
                 if k in ev.ablations and ev.ablations[k] in ev.tables}}
    statuses, parts, numbers = [], [], {}
    for label, knob, strong_at, paired in FACTORS:
        if tables.get(knob) is None:
            continue
        f = final_audits(tables[knob], ev.estimator, knob)
        values = sorted(f[knob].unique())
        signs, shown = [], []
        for scenario in INPUT_SCENARIOS:
            d = f[f["scenario"] == scenario].set_index(knob)
            if len(d) < 2:
                continue
            if strong_at == "base":     # the base value against the best other
                base = ev.base.get(knob)
                if base not in d.index:
                    continue
                strong = d.loc[base]
                weak = d.drop(index=base).sort_values("mean", ascending=False).iloc[0]
            else:
                strong = d.loc[values[-1] if strong_at == "high" else values[0]]
                weak = d.loc[values[0] if strong_at == "high" else values[-1]]
            interval = paired_difference(strong, weak) if paired else difference(strong, weak)
            signs.append(_sign(interval))
            numbers[f"{knob}_{scenario}_drop"] = interval[0]
            numbers[f"{knob}_{scenario}_drop_low"] = interval[1]
            numbers[f"{knob}_{scenario}_drop_high"] = interval[2]
            shown.append(f"{scenario} {format_audit(strong)} -> {format_audit(weak)}, {_interval(interval)}")
        if not signs:
            continue
        weaker, stronger = signs.count("above"), signs.count("below")
        status = ("supported" if weaker > len(signs) / 2 and not stronger else
                  "refuted" if stronger > len(signs) / 2 and not weaker else "cannot tell")
        statuses.append(status)
        numbers[f"{knob}_verdict"] = STATUS_CODES[status]
        parts.append(f"{label}: {status.upper()} ({weaker} of {len(signs)} scenarios weaken beyond error, "
                     f"{stronger} strengthen: " + "; ".join(shown) + ")")
    if not statuses:
        return "cannot tell", "no ablation or q grid in this run", {}
    return _combine(statuses), "; ".join(parts), numbers


def _ratio(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    t = ev.table("figA5").dropna(subset=["ratio"])
    q_max, q_min = float(t["q"].max()), float(t["q"].min())
    corner = t[t["q"] == q_max].sort_values("sigma").iloc[0]
    far = t[t["q"] == q_min].sort_values("sigma").iloc[-1]
    numbers = {"large_q": q_max, "small_sigma": float(corner["sigma"]), "ratio_there": float(corner["ratio"]),
               "small_q": q_min, "large_sigma": float(far["sigma"]), "ratio_far": float(far["ratio"]),
               "cells_above_2": int((t["ratio"] > 2).sum())}
    text = (f"ratio {corner['ratio']:{PRINTED}} at q = {q_max:g}, sigma = {corner['sigma']:g}; "
            f"{far['ratio']:{PRINTED}} at q = {q_min:g}, sigma = {far['sigma']:g}; "
            f"{numbers['cells_above_2']} of {len(t)} cells above 2")
    if corner["ratio"] > 2 and far["ratio"] < corner["ratio"]:
        return "supported", text, numbers
    if not (t["ratio"] > 2).any():
        return "refuted", text, numbers
    return "cannot tell", text, numbers


def _utility(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    t = ev.table("figA1")
    last = t[t["step"] == t["step"].max()]
    statuses, parts, numbers = [], [], {}
    for scenario, d in last.groupby("scenario"):
        base = d[d["world"].str.contains("no canary")].iloc[0]
        canary = d[~d["world"].str.contains("no canary")].iloc[0]
        diff = 100 * (canary["accuracy"] - base["accuracy"])
        se = 100 * float(np.hypot(base["se"], canary["se"]))
        numbers[f"{scenario}_accuracy_change_points"] = float(diff)
        parts.append(f"{scenario}: {100 * base['accuracy']:.1f}% without, {100 * canary['accuracy']:.1f}% "
                     f"with the canary ({diff:+.1f} ± {2 * se:.1f} points)")
        statuses.append("refuted" if diff < -max(2 * se, 1.0) else "supported")
    return _combine(statuses), "; ".join(parts) + " at the final step", numbers


def paired_t(differences: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of paired differences over repeats and its two-sided t interval at ``level``
    (n - 1 degrees of freedom; NaN bounds for one repeat)."""
    d = np.asarray(differences, dtype=float)
    mean = float(d.mean())
    if d.size < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))
    return mean, mean - half, mean + half


#: The canary kinds claim 8 compares, and the score its input kinds are read by (the paper's).
OPTIMISED, BASELINES, CLAIM_SCORE = "metagradient", ("random", "mislabeled"), "loss"


def _optimised(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    """Claim 8: per audit (one DP training, independent of the others), the metagradient bound
    minus each baseline's, averaged over procedures; a t interval over audits per baseline."""
    t = ev.table("deep-one-run")
    t = t[t["score"] == CLAIM_SCORE]
    per = t.pivot_table(index=["case", "game", "repeat"], columns="kind", values="epsilon", aggfunc="mean")
    baselines = [b for b in BASELINES if b in per]
    if OPTIMISED not in per or not baselines:
        return "cannot tell", f"not in this run: deep-one-run holds no {OPTIMISED} audits beside " \
                              f"{' or '.join(BASELINES)} ones", {}
    numbers: dict[str, float] = {"audits": float(len(per)), f"{OPTIMISED}_mean": float(per[OPTIMISED].mean())}
    parts, above, below = [], [], []
    for b in baselines:
        mean, lo, hi = paired_t(per[OPTIMISED] - per[b])
        numbers.update({f"{b}_mean": float(per[b].mean()), f"gain_over_{b}": mean,
                        f"gain_over_{b}_low": lo, f"gain_over_{b}_high": hi})
        parts.append(f"over {b} {mean:{PRINTED}} [{lo:{PRINTED}}, {hi:{PRINTED}}]")
        above.append(lo > 0)
        below.append(hi < 0)
    reason = f"metagradient's gain per audit (95% t interval over {len(per)} audits): " + "; ".join(parts)
    if all(above):
        return "supported", reason, numbers
    if any(below):
        return "refuted", reason, numbers
    return "cannot tell", reason, numbers


#: Claim 9's trainings, and the bound it reads there, named before the data: the gap case's
#: substitute-game audits, the f-DP procedure's valid bound on the white-box canaries' residual.
GAP_CASE, GAP_SCORE, GAP_PROCEDURE = "gap", "residual", "mahloujifar"


def _gap(ev: Evidence) -> tuple[str, str, dict[str, float]]:
    """Claim 9: each gap-case training's valid white-box bound against its own eps_AR."""
    t = ev.table("deep-one-run")
    rows = t[(t["case"] == GAP_CASE) & (t["game"] == "substitute") & (t["score"] == GAP_SCORE)
             & (t["procedure"] == GAP_PROCEDURE) & (t["family"] == "dp") & t["bonferroni"].astype(bool)]
    if rows.empty:
        return "cannot tell", f"not in this run: deep-one-run holds no substitute-game {GAP_CASE} training " \
                              f"with white-box canaries read by their {GAP_SCORE}", {}
    above = rows["epsilon"] > rows["eps_add_remove"]
    numbers = {"trainings": float(len(rows)), "above_eps_AR": float(above.sum()),
               "least_bound": float(rows["epsilon"].min()), "largest_bound": float(rows["epsilon"].max()),
               "eps_AR": float(rows["eps_add_remove"].max()), "eps_S": float(rows["eps_substitute"].max()),
               "cap": float(rows["perfect"].max()), "q": float(rows["sample_rate"].max())}
    reason = (f"{int(above.sum())} of {len(rows)} trainings at q = {numbers['q']:g} "
              f"(m = {int(rows['m'].max()):,} white-box canaries) have a valid bound above their eps_AR: bounds "
              + ", ".join(f"{e:{PRINTED}}" for e in rows["epsilon"])
              + f" against eps_AR {numbers['eps_AR']:{PRINTED}} (eps_S {numbers['eps_S']:{PRINTED}}, the most m "
                f"canaries can show {numbers['cap']:{PRINTED}})")
    return ("supported" if above.all() else "cannot tell"), reason, numbers


def _combine(statuses: Sequence[str]) -> str:
    """All supported: supported; any refuted: refuted; else cannot tell."""
    if statuses and all(s == "supported" for s in statuses):
        return "supported"
    if "refuted" in statuses:
        return "refuted"
    return "cannot tell"


#: Columns the claims read: an audit figure's final audits (:func:`final_audits`, with the
#: panel's own knob), the S1 figure's, and the deep-network audits'.
_AUDITS = ("step", "series", "scenario", "estimator", "epsilon", "q", "sigma", *SPREAD)
_S1 = ("q", "target_epsilon", "series", "estimator", "epsilon", *SPREAD)
_DEEP = ("case", "game", "repeat", "kind", "score", "procedure", "family", "epsilon")
_GAP = ("case", "game", "score", "procedure", "family", "bonferroni", "m", "epsilon", "perfect", "eps_add_remove",
        "eps_substitute", "sample_rate")


def _fixed(**columns: tuple[str, ...]) -> Callable[[Evidence], Mapping[str, tuple[str, ...]]]:
    return lambda ev: {name.replace("_", "-"): c for name, c in columns.items()}


def _natural_reads(scratch: bool) -> Callable[[Evidence], Mapping[str, tuple[str, ...]]]:
    return lambda ev: {f: _AUDITS for f, s in ev.natural.items() if s == scratch}


def _knob_reads(ev: Evidence) -> Mapping[str, tuple[str, ...]]:
    out = dict(list(_natural_reads(False)(ev).items())[:1])
    out.update({name: (*_AUDITS, knob, REPEATS) for knob, name in ev.ablations.items()
                if knob in ("clip", "steps", "lr")})
    return out

#: The paper's claims, numbered as the report lists them.
CLAIMS: dict[int, Claim] = {c.number: c for c in (
    Claim(1, "S1 audits exceed eps_AR and track eps_S", (
        "at the largest q, every target's audit (its repeats pooled, a valid bound) is above "
        "eps_AR, the audit rises with the target at every q and reaches at least half of eps_S; "
        "refuted if every audit at the largest q is below eps_AR (95% t interval of the repeats' "
        "mean under it)"), _s1, ("fig2",), _fixed(fig2=_S1)),
    Claim(2, "eps_S by the substitute accountant is tighter than by group privacy", (
        "eps_S(group privacy, Theorem 4.1) > eps_S(accountant) in every (q, target) cell; "
        "accountant values, no margin"), _group, ("fig2",),
        _fixed(fig2=("q", "target_epsilon", "series", "epsilon"))),
    Claim(3, "natural-data canaries exceed eps_AR at large q, S2 the tightest", (
        "in every fine-tuned experiment at its largest q and final step, S2's pooled bound is above "
        "eps_AR and no lower than those of S3-S5; refuted if S2 is below eps_AR (95% t interval of "
        "its repeats' mean under it) or another scenario's repeats beat S2's (Welch 95% t interval "
        "of the difference above 0)"), _natural, ("fig3", "figA6"), _natural_reads(False)),
    Claim(4, "input-space canaries do not exceed eps_AR when training from scratch, while S2 "
             "still tracks eps_S", (
        "in every from-scratch experiment at the final step, no S3-S5 audit's pooled bound is "
        "above eps_AR at any q and S2's is above eps_AR at the largest q; refuted if an input "
        "canary's pooled bound is above eps_AR"), _scratch, ("fig4",), _natural_reads(True)),
    Claim(5, "input-space canaries weaken as q falls, as C grows, as T grows at fixed q, and "
             "with the learning rate (Figs A2-A4)", (
        "per factor (q, C, T, lr) and each of S3-S5 at the final step, the repeats' mean audit at "
        "the strong end (largest q, smallest C, smallest T, the base learning rate) minus that at "
        "the weak end (smallest q, largest C, largest T, the best other learning rate), with its "
        "95% t interval: paired by repeat for C, T and lr, whose ends share their random numbers, "
        "Welch's for q (scenarios share their runs with z, so they are judged one by one, not "
        "pooled); a factor is "
        "supported when most scenarios' intervals are above 0 and none below, refuted when most "
        "are below 0 and none above, else cannot tell; the claim is supported when every factor "
        "is, refuted when any is"), _weakens,
        ("fig3", "figA2", "figA3", "figA4"), _knob_reads),
    Claim(6, "eps_S / eps_AR passes 2 at large q and small sigma at fixed delta", (
        "the ratio at the largest q and smallest sigma of the grid is above 2 and above the "
        "ratio at the smallest q and largest sigma; refuted if no cell is above 2"), _ratio,
        ("figA5",), _fixed(figA5=("q", "sigma", "ratio"))),
    Claim(7, "canaries do not cost utility (Fig A1)", (
        "at the final step, test accuracy with the canary is not lower than without it by more "
        "than both 2 combined s.e. over runs and 1 percentage point"), _utility,
        ("figA1",), _fixed(figA1=("step", "scenario", "world", "accuracy", "se"))),
    Claim(8, "optimised canaries give higher one-run bounds than random and mislabeled ones", (
        "in the deep-network audits (input kinds scored by their loss, in trainings without the "
        "white-box canaries when deep.trainings is white-box-apart, as Table 2 of the "
        "canary-optimisation paper trains its black-box kinds), the metagradient bound minus the "
        "random one, and minus the mislabeled one, of the same training (averaged over the "
        "procedures) has its 95% t interval over the audits (independent trainings, every case and "
        "both games pooled: the claim is about the canaries, not the game, and pooling doubles the "
        "audits; chosen before these trainings ran) above 0 for both baselines; refuted if below 0 "
        "for either"),
        _optimised, ("deep-one-run",), _fixed(deep_one_run=_DEEP), beyond=True),
    Claim(9, "one training shows the substitute gap: its valid one-run bound exceeds its eps_AR", (
        f"in every substitute-game training of the {GAP_CASE} case, the valid one-run bound "
        f"({GAP_PROCEDURE}, the (eps, delta) curve, Bonferroni-corrected guess count, white-box "
        f"canaries read by their {GAP_SCORE}; named before the data) is above that training's eps_AR: "
        "each is a 95% lower bound on the training's substitute epsilon, so eps_AR does not bound "
        "what its substitute adjacency leaks; cannot tell otherwise (a lower bound under eps_AR "
        "refutes nothing)"),
        _gap, ("deep-one-run",), _fixed(deep_one_run=_GAP), beyond=True),
)}


def judge_all(evidence: Evidence) -> list[Verdict]:
    """Every claim's verdict. A claim whose figures are not in this run, or lack a column it
    reads, cannot tell (and says which); any error of a claim's own code propagates."""
    out = []
    for claim in CLAIMS.values():
        gap = claim.missing(evidence)
        status, reason, numbers = ("cannot tell", gap, {}) if gap else claim.judge(evidence)
        out.append(Verdict(claim.number, status, reason, numbers))
    return out
