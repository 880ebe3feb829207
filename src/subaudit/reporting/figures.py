"""Figures of the paper, rendered with seaborn from the tidy tables in :mod:`subaudit.reporting.tables`.

Every figure labels its axes with units, names the estimator and the adjacency in
the legend, and says what its error bars are. Files are written atomically and
without timestamps, so the same table gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from subaudit.artifacts import atomic_path  # noqa: E402
from subaudit.estimation import ESTIMATORS  # noqa: E402
from subaudit.estimation.one_run import FDP_FAMILIES  # noqa: E402
from subaudit.estimation.procedures import bound_label  # noqa: E402
from subaudit.scenarios import SCENARIOS  # noqa: E402
from subaudit.scenarios.deep_canaries import DEEP_KINDS  # noqa: E402
from subaudit.reporting.tables import CEILING, EPS_AR, EPS_GROUP, EPS_S, FINITE_R, deep_view  # noqa: E402
from subaudit.reporting.compare import PRINTED  # noqa: E402

_ACCOUNTING_STYLE = {
    EPS_S: dict(color="#1f77b4", linestyle="-", marker="o"),
    EPS_GROUP: dict(color="#9467bd", linestyle="--", marker="s"),
    EPS_AR: dict(color="#2ca02c", linestyle=":", marker="^"),
}
_CEILING_STYLE = dict(color="black", linestyle="-.", marker="x", linewidth=1.2)
_AUDIT_COLORS = ["#d62728", "#ff7f0e", "#8c564b", "#e377c2"]


#: Inches: one or two panels still leave room for the titles and the legend below them.
_MIN_WIDTH = 11.0


def _theme() -> None:
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)


def _estimator_label(name: str) -> str:
    """'auc estimator', or 'paper estimator, may overstate' for one not shown valid."""
    valid = name in ESTIMATORS and ESTIMATORS[name].valid
    return f"{name} estimator" + ("" if valid else ", may overstate")


def epsilon_vs_target(table: pd.DataFrame) -> plt.Figure:
    """Fig 2: epsilon against the target eps_S, one panel per q (S1 audit vs accountants)."""
    _theme()
    qs = sorted(table["q"].unique(), reverse=True)
    fig, axes = plt.subplots(1, len(qs), figsize=(max(4.2 * len(qs), _MIN_WIDTH), 4.2), squeeze=False,
                             sharey=True, layout="constrained")
    ceilings = [s for s in table["series"].unique() if s.startswith(CEILING.split("(")[0])]
    styles = {**_ACCOUNTING_STYLE, **{s: _CEILING_STYLE for s in ceilings}}
    audit_series = sorted(s for s in table["series"].unique() if s not in styles)
    n_rep = int(table["n_repeats"].max()) if len(audit_series) else 0
    for ax, q in zip(axes[0], qs):
        sub = table[table["q"] == q]
        for series, style in styles.items():
            d = sub[sub["series"] == series].sort_values("target_epsilon")
            ax.plot(d["target_epsilon"], d["epsilon"], label=series, **style)
        for i, series in enumerate(audit_series):
            d = sub[sub["series"] == series].sort_values("target_epsilon")
            color = _AUDIT_COLORS[i % len(_AUDIT_COLORS)]
            ax.plot(d["target_epsilon"], d["epsilon"], label=series, color=color, marker="D",
                    linestyle="-", linewidth=1.5)
            ax.vlines(d["target_epsilon"], d["low"], d["high"], color=color, linewidth=4, alpha=0.35)
        steps, delta = int(sub["steps"].iloc[0]), float(sub["delta"].iloc[0])
        ax.set_title(f"q = {q:g}  (T = {steps}, δ = {delta:g})")
        ax.set_xlabel("target ε_S (substitute accountant)")
        ax.set_ylabel("ε at δ (privacy loss, nats)")
        ax.set_xticks(sorted(sub["target_epsilon"].unique()))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), frameon=False)
    fig.suptitle("S1 worst-case dataset canaries: audited ε against accountants"
                 + (f"\n(markers: the {n_rep} repeats pooled into one audit; bars: the range of "
                    "the repeats' own bounds)" if n_rep > 1 else ""))
    return fig


def ratio_grid(table: pd.DataFrame) -> plt.Figure:
    """Fig A5: eps_S / eps_AR against sigma, one line per q, with the ratio-2 reference."""
    _theme()
    data = table.dropna(subset=["ratio"]).copy()
    data["q"] = data["q"].map(lambda v: f"{v:g}")
    order = [f"{v:g}" for v in sorted(table["q"].unique(), reverse=True)]
    steps, delta = int(table["steps"].iloc[0]), float(table["delta"].iloc[0])
    fig, (ax_r, ax_e) = plt.subplots(1, 2, figsize=(12.5, 4.6), layout="constrained")
    sns.lineplot(data=data, x="sigma", y="ratio", hue="q", hue_order=order, marker="o", ax=ax_r,
                 palette="viridis")
    ax_r.axhline(2.0, color="black", linestyle="--", linewidth=1,
                 label="ratio 2 (group privacy with δ scaled)")
    ax_r.set_xscale("log")
    ax_r.set_xlabel("noise multiplier σ")
    ax_r.set_ylabel("ε_S / ε_AR (same δ)")
    ax_r.set_title("Ratio of substitute to add/remove ε")
    ax_r.legend(title="sampling rate q", fontsize="small", loc="upper left",
                bbox_to_anchor=(1.01, 1.0))
    long = data.melt(id_vars=["q", "sigma"], value_vars=["eps_substitute", "eps_add_remove"],
                     var_name="adjacency", value_name="epsilon")
    long["adjacency"] = long["adjacency"].map({"eps_substitute": "ε_S (substitute accountant)",
                                               "eps_add_remove": "ε_AR (add/remove accountant)"})
    sns.lineplot(data=long, x="sigma", y="epsilon", hue="q", hue_order=order, style="adjacency",
                 markers=True, ax=ax_e, palette="viridis", legend="brief")
    ax_e.set_xscale("log")
    ax_e.set_yscale("log")
    ax_e.set_xlabel("noise multiplier σ")
    ax_e.set_ylabel("ε at δ (privacy loss, nats)")
    ax_e.set_title("ε by adjacency")
    ax_e.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    title = f"Substitute vs add/remove accounting at the same δ (T = {steps}, δ = {delta:g})"
    missing = int(table["ratio"].isna().sum())
    if missing:
        title += (f"\n{missing} grid cell(s) beyond the accountant's range are omitted "
                  "(reason in the CSV's note column)")
    fig.suptitle(title)
    return fig


def save(fig: plt.Figure, png: str | Path, pdf: str | Path, paper: str = "") -> None:
    """Write ``fig`` as PNG and PDF atomically, without timestamps, then close it;
    ``paper`` names the figure's place in the paper (a note in its corner)."""
    if paper:
        fig.text(0.995, 0.005, f"paper: {paper}", ha="right", va="bottom", fontsize="x-small",
                 color="grey")
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=200, metadata={"Software": None})
    with atomic_path(pdf) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "Creator": None,
                                                 "Producer": None})
    plt.close(fig)


#: How a panel's knob is written in a panel title.
PANEL_LABELS = {"q": "q", "clip": "C", "steps": "T", "lr": "η"}


def _panel_values(table: pd.DataFrame, panel: str) -> list:
    """Panel values in reading order: q from 1 down, an ablated knob upwards."""
    return sorted(table[panel].unique(), reverse=panel == "q")


def epsilon_vs_step(table: pd.DataFrame, title: str, panel: str = "q") -> plt.Figure:
    """Natural-data audit figure (Figs 3, A6, 4; an ablation, Figs A2-A4, with ``panel`` the
    ablated knob): epsilon against step, one panel per value of ``panel``.

    Accountant lines (eps_S substitute, eps_AR add/remove) and, per scenario and
    estimator, the audit with its repeats pooled (a line) in a band spanning the repeats' own
    bounds.
    """
    _theme()
    values = _panel_values(table, panel)
    fig, axes = plt.subplots(1, len(values), figsize=(max(4.6 * len(values), _MIN_WIDTH), 4.4),
                             squeeze=False, sharey=True, layout="constrained")
    n_rep = int(table["n_repeats"].max())
    for ax, value in zip(axes[0], values):
        sub = table[table[panel] == value]
        for series, style in _ACCOUNTING_STYLE.items():
            d = sub[sub["series"] == series].sort_values("step")
            if len(d):
                ax.plot(d["step"], d["epsilon"], label=series, color="black",
                        linestyle=style["linestyle"], linewidth=1.4)
        audits = sub[sub["scenario"].fillna("") != ""]
        for (scenario, series, estimator), d in audits.groupby(["scenario", "series", "estimator"]):
            d = d.sort_values("step")
            color = SCENARIOS[scenario].color if scenario in SCENARIOS else "grey"
            ax.plot(d["step"], d["epsilon"], color=color, marker="o", markersize=3,
                    linestyle=ESTIMATORS[estimator].linestyle if estimator in ESTIMATORS else "-.",
                    label=f"{series} ({_estimator_label(estimator)})")
            ax.fill_between(d["step"], d["low"], d["high"], color=color, alpha=0.15, linewidth=0)
        sigma, delta = float(sub["sigma"].iloc[0]), float(sub["delta"].iloc[0])
        head = f"q = {value:g}" if panel == "q" else \
            f"{PANEL_LABELS[panel]} = {value:g}  (q = {float(sub['q'].iloc[0]):g})"
        ax.set_title(f"{head}  (σ = {sigma:{PRINTED}}, δ = {delta:g})")
        ax.set_xlabel("training step t")
        ax.set_ylabel("ε at δ (privacy loss, nats)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False,
               fontsize="small")
    bands = (f"lines: the {n_rep} repeats pooled into one audit; bands: the range of the repeats' "
             "own bounds" if n_rep > 1 else "one repeat per audit: no band")
    fig.suptitle(f"{title}\naudits under substitute adjacency; {bands}")
    return fig


def epsilon_vs_runs(table: pd.DataFrame, title: str) -> plt.Figure:
    """Fig 5: final-step epsilon against the number of runs R', one panel per q, with the
    accountants, the final-iterate ceiling and each estimator's finite-R ceiling."""
    _theme()
    qs = _panel_values(table, "q")
    fig, axes = plt.subplots(1, len(qs), figsize=(max(4.6 * len(qs), _MIN_WIDTH), 4.6),
                             squeeze=False, sharey=True, layout="constrained")
    n_rep = int(table["n_repeats"].max())
    # The finite-R ceilings can sit far above everything else: the axis shows the audits,
    # the accountants and the final-iterate ceiling, and a ceiling above it leaves the top.
    shown = table[~table["series"].str.startswith(FINITE_R.split("(")[0])]
    top = 1.2 * float(shown["high"].max())
    for ax, q in zip(axes[0], qs):
        sub = table[table["q"] == q]
        refs = sub[sub["scenario"].fillna("") == ""]
        for series, d in refs.groupby("series", sort=False):
            d = d.sort_values("runs")
            if series in _ACCOUNTING_STYLE:
                style = dict(color="black", linestyle=_ACCOUNTING_STYLE[series]["linestyle"])
            elif series.startswith(CEILING.split("(")[0]):
                style = dict(_CEILING_STYLE, marker=None)
            else:
                est = d["estimator"].iloc[0]
                style = dict(color="grey", linewidth=1.0, linestyle=ESTIMATORS[est].linestyle
                             if est in ESTIMATORS else "-.")
            ax.plot(d["runs"], d["epsilon"], label=series, **style)
        audits = sub[sub["scenario"].fillna("") != ""]
        for (scenario, series, estimator), d in audits.groupby(["scenario", "series", "estimator"]):
            d = d.sort_values("runs")
            ax.errorbar(d["runs"], d["epsilon"], yerr=[d["epsilon"] - d["low"], d["high"] - d["epsilon"]], capsize=3,
                        color=SCENARIOS[scenario].color if scenario in SCENARIOS else "grey",
                        linestyle=ESTIMATORS[estimator].linestyle if estimator in ESTIMATORS else "-.",
                        marker="o", markersize=4, label=f"{series} ({_estimator_label(estimator)})")
        ax.set_xscale("log")
        ax.set_ylim(0, top)
        ticks = sorted(sub["runs"].unique())
        ax.set_xticks(ticks, [f"{int(t):,}" for t in ticks])
        ax.minorticks_off()
        sigma, step = float(sub["sigma"].iloc[0]), int(sub["step"].iloc[0])
        ax.set_title(f"q = {q:g}  (σ = {sigma:{PRINTED}}, final step T = {step})")
        ax.set_xlabel("runs R' (half with z, half with z')")
        ax.set_ylabel("ε at δ (privacy loss, nats)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False, fontsize="small")
    bars = (f"markers: the mean over {n_rep} repeats; error bars: their range" if n_rep > 1
            else "one repeat: no error bars")
    fig.suptitle(f"{title}\nthe first R' runs of each audit, substitute adjacency; {bars}; "
                 "a finite-R ceiling above the axis is off the top")
    return fig


def utility(table: pd.DataFrame, title: str) -> plt.Figure:
    """Fig A1: test accuracy over training, runs with the target z vs with the canary z'."""
    _theme()
    scenarios = sorted(table["scenario"].unique())
    fig, axes = plt.subplots(1, len(scenarios), figsize=(max(4.6 * len(scenarios), _MIN_WIDTH), 4.0),
                             squeeze=False, sharey=True, layout="constrained")
    for ax, scenario in zip(axes[0], scenarios):
        sub = table[table["scenario"] == scenario]
        for (world, d), color in zip(sub.groupby("world"), ["#1f77b4", "#d62728"]):
            d = d.sort_values("step")
            ax.errorbar(d["step"], 100 * d["accuracy"], yerr=200 * d["se"].fillna(0.0),
                        label=world, color=color, marker="o", markersize=3, capsize=3)
        runs = int(sub["n_runs"].max())
        name = SCENARIOS[scenario].title if scenario in SCENARIOS else scenario
        ax.set_title(f"{name} ({runs} runs per world)")
        ax.set_xlabel("training step t")
        ax.set_ylabel("test accuracy (%)")
        ax.legend(fontsize="small")
    fig.suptitle(f"{title}\nerror bars: ±2 standard errors over runs")
    return fig


def one_run(table: pd.DataFrame, title: str) -> plt.Figure:
    """One-run audits beside the R-run audit of the same canary family, the final-iterate
    ceiling and the accountants: epsilon per q, one panel per canary kind."""
    _theme()
    kinds = list(dict.fromkeys(table["kind"]))
    qs = sorted(table["q"].unique(), reverse=True)
    fig, axes = plt.subplots(1, len(kinds), figsize=(max(6.5 * len(kinds), _MIN_WIDTH), 5.6),
                             squeeze=False, sharey=True, layout="constrained")
    audits = sorted(s for s in table["series"].unique() if "audit" in s)
    colors = dict(zip(audits, _AUDIT_COLORS + ["#17becf", "#bcbd22"]))
    refs = {EPS_S: _ACCOUNTING_STYLE[EPS_S], EPS_AR: _ACCOUNTING_STYLE[EPS_AR],
            CEILING.format(adjacency="substitute"): _CEILING_STYLE}
    x = {q: i for i, q in enumerate(qs)}
    for ax, kind in zip(axes[0], kinds):
        sub = table[table["kind"] == kind]
        for series, style in refs.items():
            d = sub[sub["series"] == series].sort_values("q", ascending=False)
            ax.plot([x[q] for q in d["q"]], d["epsilon"], label=series, **style)
        for i, series in enumerate(s for s in audits if s in set(sub["series"])):
            d = sub[sub["series"] == series].sort_values("q", ascending=False)
            shift = (i - (len(audits) - 1) / 2) * 0.08
            trainings = int(d["trainings"].iloc[0])
            cost = f"{trainings:,} training{'s' if trainings > 1 else ''}"
            ax.errorbar([x[q] + shift for q in d["q"]], d["epsilon"], yerr=2 * d["se"].fillna(0.0),
                        label=f"{series}: {cost} per audit", color=colors[series], marker="D",
                        linestyle="none", capsize=4)
        ax.set_xticks(range(len(qs)), [f"{q:g}" for q in qs])
        ax.set_xlabel("sampling rate q")
        ax.set_ylabel("ε at δ (privacy loss, nats)")
        ax.set_title(f"{kind} canaries")
        ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
                  frameon=False)
    steps, delta = int(table["step"].max()), float(table["delta"].iloc[0])
    reps = int(table["n_repeats"].max())
    fig.suptitle(f"{title} (T = {steps}, δ = {delta:g})\n"
                 f"error bars: ±2 standard errors over up to {reps} repeats")
    return fig


def reconstruction(table: pd.DataFrame, pairs: list[tuple[np.ndarray, np.ndarray, str]],
                   title: str, shape: tuple[int, ...]) -> plt.Figure:
    """Data-trap reconstruction: trap outcomes against the construction's prediction (bars),
    and recovered images beside their originals (``pairs``: recovered, original, caption;
    flat images of ``shape``, (H, W) grey or (H, W, 3) colour, pixels in [0, 1])."""
    _theme()
    cols = max(len(pairs), 1)
    fig = plt.figure(figsize=(max(_MIN_WIDTH, 1.4 * cols), 8.5))
    grid = fig.add_gridspec(3, cols, height_ratios=[2.4, 1, 1], hspace=0.55)
    ax = fig.add_subplot(grid[0, :])
    sns.barplot(data=table, x="outcome", y="units", hue="source", ax=ax,
                palette=["#4c72b0", "#dd8452", "#55a868"])
    ax.set_xlabel("trap outcome after fine-tuning")
    ax.set_ylabel("trap units (count)")
    ax.legend(title=None, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, frameon=False)
    ax.set_title(title)
    for i, (rec, orig, caption) in enumerate(pairs):
        for row, (img, label) in enumerate(((rec, "recovered"), (orig, "original"))):
            a = fig.add_subplot(grid[1 + row, i])
            a.imshow(np.clip(img, 0, 1).reshape(shape), cmap="gray" if len(shape) == 2 else None,
                     vmin=0, vmax=1)
            a.set_xticks([])
            a.set_yticks([])
            a.set_xlabel(caption if row else "", fontsize=7)
            if i == 0:
                a.set_ylabel(label)
    return fig



_CAP_MARK = {"marker": "_", "markersize": 14, "markeredgewidth": 2}
_CEILING_MARK = {"marker": "v", "markersize": 6}


def _draw_caps(ax: plt.Axes, sub: pd.DataFrame, order: list[str], procedures: list[str]) -> None:
    """Over each bar, the most its m canaries could show (every guess right) and, where the
    kind has one, the final-iterate ceiling, at the positions of seaborn's dodged bars."""
    width = 0.8 / len(procedures)
    caps = sub.groupby(["kind", "procedure"])[["perfect", "ceiling"]].max()
    for (kind, procedure), row in caps.iterrows():
        x = order.index(kind) - 0.4 + width * (procedures.index(procedure) + 0.5)
        ax.plot([x], [row["perfect"]], linestyle="none", color="black", **_CAP_MARK)
        if pd.notna(row["ceiling"]):
            ax.plot([x], [row["ceiling"]], linestyle="none", color="black", **_CEILING_MARK)


def deep_one_run(table: pd.DataFrame, score: str, title: str) -> plt.Figure:
    """One-run audits of deep networks: the bound per canary kind and procedure (bars: mean
    over audits; dots: each audit) beside the most its m canaries could show and the
    final-iterate ceiling (marks), one panel per (game, case), the accountant's epsilons in
    each panel's title. Input kinds read ``score``."""
    _theme()
    mine = deep_view(table, score)
    games, cases = list(dict.fromkeys(mine["game"])), list(dict.fromkeys(mine["case"]))
    kinds = list(dict.fromkeys(mine["kind"]))
    procedures = list(dict.fromkeys(mine["procedure"]))
    palette = dict(zip(procedures, _AUDIT_COLORS))
    fig, axes = plt.subplots(len(games), len(cases), figsize=(max(5.5 * len(cases), _MIN_WIDTH), 4.0 * len(games)),
                             squeeze=False, sharey=True, layout="constrained")
    keyed = None  # the panel whose legend the figure's is
    for i, game in enumerate(games):
        for j, case in enumerate(cases):
            ax = axes[i][j]
            sub = mine[(mine["game"] == game) & (mine["case"] == case)]
            if sub.empty:  # a case that audits some games only
                ax.set_title(f"{case}, {game} game: not audited")
                ax.set_axis_off()
                continue
            order = [k for k in kinds if k in set(sub["kind"])]
            sns.barplot(sub, x="kind", y="epsilon", hue="procedure", order=order, hue_order=procedures,
                        palette=palette, errorbar=None, alpha=0.55, ax=ax, legend=keyed is None)
            keyed = ax if keyed is None else keyed
            sns.stripplot(sub, x="kind", y="epsilon", hue="procedure", order=order, hue_order=procedures,
                          palette=palette, dodge=True, size=4, edgecolor="black", linewidth=0.5, ax=ax,
                          legend=False, jitter=False)   # seaborn jitters from numpy's global RNG
            _draw_caps(ax, sub, order, procedures)
            ax.set_title(f"{case}, {game} game ({sub['adjacency'].iloc[0]})\naccountant: eps_AR = "
                         f"{sub['eps_add_remove'].mean():{PRINTED}}, eps_S = {sub['eps_substitute'].mean():{PRINTED}}")
            ax.set_xlabel("canary kind")
            ax.tick_params(axis="x", labelrotation=20)
            ax.set_ylabel("one-run lower bound on ε at δ (nats)")
    handles, labels = keyed.get_legend_handles_labels()
    if keyed.get_legend() is not None:
        keyed.get_legend().remove()
    plain = mine["family"].map(lambda f: FDP_FAMILIES[f].tag == "" if f in FDP_FAMILIES else False)
    first = pd.concat([mine[plain], mine[~plain]]).groupby("procedure")[["family", "bonferroni"]].first()
    marks = [(_CAP_MARK, "most possible: every guess right (the procedure's cap at m)")]
    if mine["ceiling"].notna().any():
        marks.append((_CEILING_MARK, "final-iterate ceiling of the training"))
    fig.legend([*handles, *(plt.Line2D([], [], linestyle="none", color="black", **style) for style, _ in marks)],
               [*(f"{lab} procedure ({bound_label(first.loc[lab, 'family'], first.loc[lab, 'bonferroni'])})"
                  for lab in labels), *(text for _, text in marks)],
               loc="outside lower center", ncol=min(len(labels) + len(marks), 3), frameon=False)
    reps = int(mine.groupby(["game", "case", "kind", "procedure"])["epsilon"].size().max())
    white = mine["kind"].str.split(" ").str[0].map(lambda k: k in DEEP_KINDS and DEEP_KINDS[k].white_box)
    counts = ["/".join(f"{int(m):,}" for m in sorted(mine.loc[side, "m"].unique())) + f" {name}" for side, name in
              ((~white, "per input kind"), (white, "white-box")) if side.any()]
    fig.suptitle(f"{title}\nm = {', '.join(counts)} canaries, input kinds scored by {score}, white-box ones by "
                 f"their update unless named; [if ...]: the curve a bound assumes\n"
                 f"bars: mean over {reps} audits (one DP training each), dots: each audit")
    return fig


#: Renderers by plot kind (subaudit.reporting.figure_registry.PLOT_KINDS).
PLOTS = {"epsilon-vs-target": epsilon_vs_target, "epsilon-vs-step": epsilon_vs_step,
         "ratio-grid": ratio_grid, "utility": utility, "one-run": one_run,
         "ablation": epsilon_vs_step, "epsilon-vs-runs": epsilon_vs_runs,
         "reconstruction": reconstruction, "deep-one-run": deep_one_run}

__all__ = ["PANEL_LABELS", "PLOTS", "deep_one_run", "epsilon_vs_runs", "epsilon_vs_step", "epsilon_vs_target",
           "one_run", "ratio_grid", "reconstruction", "save", "utility"]

