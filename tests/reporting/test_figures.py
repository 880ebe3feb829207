"""Figure tables and rendering: the numbers plotted are the numbers in the CSV."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from subaudit.reporting import figures, tables
from subaudit.estimation.ceilings import final_iterate_epsilon
from subaudit.reporting.tables import EPS_AR, EPS_GROUP, EPS_S, deep_summary, fig2_table, figA5_table


def _calibrations():
    out = []
    for q in (1.0, 0.25):
        for eps in (2.0, 4.0):
            out.append({"target_epsilon": eps, "q": q, "steps": 500, "delta": 1e-5,
                        "sigma": 10.0 / eps, "eps_substitute": eps, "eps_add_remove": eps / 2.2,
                        "eps_group": eps * 1.1, "delta_group_add_remove": 4e-6})
    return out


def _estimates(values):
    recs = []
    for (q, eps), reps in values.items():
        for r, v in enumerate(reps):
            for est, shift in (("auc", -0.1), ("paper", 0.0)):
                recs.append({"q": q, "target_epsilon": eps, "repeat": r, "step": 500,
                             "estimator": est, "epsilon": v + shift})
                recs.append({"q": q, "target_epsilon": eps, "repeat": r, "step": 250,
                             "estimator": est, "epsilon": -100.0})  # earlier step: ignored
    return recs


def _pooled(values):
    """The repeats pooled into one audit: here 0.2 above the best repeat (1,000 runs each)."""
    return [{"q": q, "target_epsilon": eps, "step": step, "estimator": est,
             "epsilon": max(reps) + shift + 0.2, "n_positive": 500 * len(reps), "n_negative": 500 * len(reps)}
            for (q, eps), reps in values.items() for est, shift in (("auc", -0.1), ("paper", 0.0))
            for step in (250, 500)]


VALUES = {(1.0, 2.0): [1.9, 2.0, 2.1], (1.0, 4.0): [3.5, 3.9, 4.0],
          (0.25, 2.0): [1.0, 1.5, 1.7], (0.25, 4.0): [3.0, 3.2, 3.1]}


def test_fig2_table_shows_the_pooled_audit_beside_the_repeats_at_the_final_step():
    table = fig2_table(_calibrations(), _estimates(VALUES), _pooled(VALUES), adjacency="substitute")
    paper = table[table["estimator"] == "paper"]
    assert len(paper) == 4
    row = paper[(paper.q == 0.25) & (paper.target_epsilon == 2.0)].iloc[0]
    vals = np.array(VALUES[(0.25, 2.0)])
    assert row.epsilon == pytest.approx(vals.max() + 0.2)   # the pooled audit
    assert row["mean"] == pytest.approx(vals.mean())
    assert row.se == pytest.approx(vals.std(ddof=1) / np.sqrt(3))
    assert (row.low, row.high) == pytest.approx((vals.min(), vals.max()))
    assert (row.n_repeats, row.n_runs) == (3, 3000)
    assert "paper estimator" in row.series and "substitute" in row.series
    acc = table[table["series"] == EPS_GROUP]
    assert sorted(acc["epsilon"]) == pytest.approx([2.2, 2.2, 4.4, 4.4])
    assert set(table["series"]) >= {EPS_S, EPS_GROUP, EPS_AR}
    # the final-iterate ceiling at each calibration (sigma = 10 / eps here), from subaudit.estimation.ceilings
    ceiling = table[table["series"] == "final-iterate ceiling (substitute)"]
    assert len(ceiling) == 4
    for row in ceiling.itertuples():
        assert row.epsilon == pytest.approx(final_iterate_epsilon(row.sigma, row.q, 500, 1e-5, "substitute"))


def test_fig2_draws_the_pooled_audits_and_the_range_of_the_repeats():
    table = fig2_table(_calibrations(), _estimates(VALUES), _pooled(VALUES), adjacency="substitute")
    fig = figures.epsilon_vs_target(table)
    axes = fig.axes
    assert len(axes) == 2
    assert axes[0].get_title().startswith("q = 1")
    assert "ε" in axes[0].get_ylabel() and "target" in axes[0].get_xlabel()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert EPS_S in labels and EPS_AR in labels and EPS_GROUP in labels
    assert "final-iterate ceiling (substitute)" in labels
    assert any("auc estimator" in lab for lab in labels)
    assert "3 repeats pooled into one audit" in fig.get_suptitle()
    # the bar of (q = 1, eps = 2, paper) spans the repeats; its marker is the pooled audit
    vals = np.array(VALUES[(1.0, 2.0)])
    segs = [c for c in axes[0].collections if hasattr(c, "get_segments")]
    spans = [tuple(s[:, 1]) for c in segs for s in c.get_segments()]
    assert any(lo == pytest.approx(vals.min()) and hi == pytest.approx(vals.max()) for lo, hi in spans)
    assert any(np.any(np.isclose(line.get_ydata(), vals.max() + 0.2)) for line in axes[0].get_lines())


def test_figA5_marks_the_ratio_two_and_skips_missing_cells(tmp_path):
    rows = [pd.DataFrame({"q": [q] * 3, "sigma": [1.0, 2.0, 4.0], "steps": 500, "delta": 1e-5,
                          "eps_add_remove": [np.nan, 3.0, 1.0], "eps_substitute": [np.nan, 7.0, 2.1],
                          "note": ["beyond range", "", ""]}) for q in (1.0, 0.25)]
    for r in rows:
        r["ratio"] = r["eps_substitute"] / r["eps_add_remove"]
    table = figA5_table(rows)
    assert list(table["q"].unique()) == [1.0, 0.25]
    fig = figures.ratio_grid(table)
    ax = fig.axes[0]
    assert any(np.allclose(line.get_ydata(), 2.0) for line in ax.get_lines())
    assert "ε_S / ε_AR" in ax.get_ylabel() and "σ" in ax.get_xlabel()
    assert "2 grid cell(s)" in fig.get_suptitle()
    figures.save(fig, tmp_path / "a.png", tmp_path / "a.pdf")
    first = (tmp_path / "a.pdf").read_bytes()
    figures.save(figures.ratio_grid(table), tmp_path / "a.png", tmp_path / "a.pdf")
    assert (tmp_path / "a.pdf").read_bytes() == first  # no timestamps: same table, same bytes
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_utility_figure_titles():
    """The figure's title is the caller's; each panel names its scenario from the registry."""
    from subaudit.reporting.tables import utility_table

    rows = [{"scenario": s, "world": w, "step": t, "run": r, "accuracy": 0.1 * t + 0.01 * r}
            for s in ("S2", "S3") for w in ("plain", "canary") for t in (0, 5) for r in range(3)]
    fig = figures.utility(utility_table(pd.DataFrame(rows).to_dict("records")), "Utility: toy")
    assert fig.get_suptitle().startswith("Utility: toy\n")
    assert [ax.get_title() for ax in fig.axes] == ["S2 crafted gradient (3 runs per world)",
                                                   "S3 crafted input (3 runs per world)"]
    assert fig.axes[0].get_ylabel() == "test accuracy (%)"


def test_one_run_table_and_figure():
    from subaudit.reporting.tables import one_run_table

    acc = pd.DataFrame([{"q": q, "sigma": s, "delta": 1e-5, "step": t, "eps_substitute": 4.0 * t / 100,
                         "eps_add_remove": 2.0 * t / 100} for q, s in ((1.0, 20.0), (0.25, 5.0))
                        for t in (50, 100)])
    one = [{"kind": kind, "q": q, "repeat": r, "method": m, "family": "dp", "epsilon": e + r * 0.1, "canaries": 50}
           for kind in ("gradient", "label") for q in (1.0, 0.25) for r in range(3)
           for m, e in (("steinke", 1.0), ("mahloujifar", 1.5))]
    one += [{**r, "family": "gdp", "epsilon": 2 * r["epsilon"]} for r in one if r["method"] == "mahloujifar"]
    r_run = [{"q": q, "scenario": sc, "estimator": est, "step": step, "repeat": r, "epsilon": 3.0 + r,
              "n_positive": 500, "n_negative": 500} for q in (1.0, 0.25) for sc in ("S2", "S4")
             for est in ("auc", "paper") for step in (50, 100) for r in range(2)]
    table = one_run_table(acc, one, r_run, {"gradient": "S2", "label": "S4"}, "auc")
    row = table[(table.kind == "gradient") & (table.q == 0.25) & (table.method == "mahloujifar")
                & ~table.series.str.contains("mu-GDP")].iloc[0]
    assert row.epsilon == pytest.approx(1.6) and row.se == pytest.approx(0.1 / np.sqrt(3))
    assert (row.trainings, row.n_repeats) == (1, 3) and "seconds" not in table  # versioned: no wall time
    rr = table[(table.kind == "label") & (table.q == 1.0) & table.series.str.startswith("R-run")].iloc[0]
    assert rr.series == "R-run audit (S4, auc estimator)" and rr.epsilon == pytest.approx(3.5)
    assert rr.trainings == 1000 and rr.step == 100
    ceiling = table[(table.series == "final-iterate ceiling (substitute)") & (table.q == 0.25)]
    assert ceiling.epsilon.iloc[0] == pytest.approx(final_iterate_epsilon(5.0, 0.25, 100, 1e-5, "substitute"))
    fig = figures.one_run(table, "test")
    assert [ax.get_title() for ax in fig.axes] == ["gradient canaries", "label canaries"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("1,000 trainings" in lab for lab in labels)
    assert any("one-run audit (mahloujifar, m = 50): 1 training per audit" == lab for lab in labels)
    assert any("one-run audit (mahloujifar, mu-GDP test, m = 50): 1 training per audit" == lab for lab in labels)
    assert "ε" in fig.axes[0].get_ylabel() and "q" in fig.axes[0].get_xlabel()


def test_ablation_figure_has_a_panel_per_value():
    from subaudit.reporting.tables import natural_table

    acc = pd.DataFrame([{"clip": c, "q": 1.0, "sigma": 20.0, "delta": 1e-5, "step": t,
                         "eps_substitute": 4.0 * t / 10, "eps_add_remove": 2.0 * t / 10}
                        for c in (1.0, 4.0) for t in (5, 10)])
    est = [{"clip": c, "q": 1.0, "scenario": "S3", "repeat": 0, "step": t, "estimator": "auc",
            "epsilon": c * t / 10} for c in (1.0, 4.0) for t in (5, 10)]
    pooled = [{**e, "n_positive": 500, "n_negative": 500} for e in est]
    pooled = [{k: v for k, v in e.items() if k != "repeat"} for e in pooled]
    table = natural_table(acc, est, pooled, panel="clip")
    assert list(table[table.scenario == "S3"]["clip"]) == [1.0, 1.0, 4.0, 4.0]
    fig = figures.epsilon_vs_step(table, "test", panel="clip")
    assert [ax.get_title() for ax in fig.axes] == ["C = 1  (q = 1)  (σ = 20, δ = 1e-05)",
                                                   "C = 4  (q = 1)  (σ = 20, δ = 1e-05)"]
    assert "no band" in fig.get_suptitle()


def test_runs_table_estimates_the_first_runs_and_draws_the_ceilings():
    from subaudit.estimation import estimate_epsilon, finite_r_ceiling
    from subaudit.reporting.tables import runs_table

    rng = np.random.default_rng(0)
    bits = np.arange(400) % 2 == 0
    audits = [{"q": 1.0, "scenario": "S2", "repeat": r, "bits": bits.astype(int),
               "scores": rng.normal(2.0 * bits, 1.0)} for r in range(2)]
    final = pd.DataFrame([{"q": 1.0, "sigma": 5.0, "step": 10, "eps_substitute": 4.0,
                           "eps_add_remove": 2.0}])
    table = runs_table(final, audits, [100, 400], 1e-5, 0.05, ["auc"])
    s2 = table[table.scenario == "S2"].set_index("runs")
    first = [estimate_epsilon(a["scores"][:100], a["bits"][:100], 1e-5, 0.05).epsilon for a in audits]
    assert s2.loc[100, "epsilon"] == pytest.approx(np.mean(first))
    assert s2.loc[100, "n_repeats"] == 2
    ceiling = table[table.series == "finite-R ceiling (auc estimator)"].set_index("runs")
    assert ceiling.loc[400, "epsilon"] == pytest.approx(finite_r_ceiling(200, 200, 1e-5))
    assert ceiling.loc[100, "epsilon"] < ceiling.loc[400, "epsilon"]
    fig = figures.epsilon_vs_runs(table, "test")
    ax = fig.axes[0]
    assert "R'" in ax.get_xlabel() and "ε" in ax.get_ylabel()
    assert ax.get_ylim()[1] < ceiling.loc[400, "epsilon"]      # the ceiling leaves the top


def test_deep_table_summary_and_figure(tmp_path):
    from test_claims import deep, gap_audit

    table = deep()
    assert list(dict.fromkeys(table["case"])) == ["scratch", "finetune", "gap"]   # registry order
    assert list(dict.fromkeys(table["kind"])) == ["random", "mislabeled", "metagradient", "gradient"]
    assert set(table["reference"]) == {8.0, 16.0, 7.06}                           # eps_AR, eps_S by game
    summary = deep_summary(table, "loss").set_index(["game", "procedure", "family", "kind"])
    cell = table[(table["game"] == "substitute") & (table["procedure"] == "steinke")
                 & (table["kind"] == "metagradient") & (table["case"] == "scratch")]["epsilon"]
    row = summary.loc[("substitute", "steinke", "(eps, delta)-DP", "metagradient")]
    assert row["scratch avg"] == pytest.approx(cell.mean()) and row["scratch med"] == pytest.approx(cell.median())
    assert row["scratch cap"] == 5.0 and pd.isna(row["scratch ceiling"])  # input kinds have no ceiling
    assert row["scratch reference"] == 16.0 and row["scratch audits"] == 3
    # a family that assumes the mechanism is named with the kind, never pooled with the valid one
    table = tables.deep_table([*(table[table["case"] == c].to_dict("records") for c in ("scratch", "finetune")),
                               gap_audit(3.5), gap_audit(5.0, family="dpsgd")])
    view = tables.deep_view(table, "loss")
    assert set(view.loc[view["case"] == "gap", "kind"]) == {"gradient (residual)", "gradient (residual) [if DP-SGD]"}
    assert set(view.loc[view["kind"].str.contains("DP-SGD"), "family"]) == {"dpsgd"}
    fig = figures.deep_one_run(table, "loss", "t")
    titles = [ax.get_title() for ax in fig.axes]
    assert "scratch, membership game (add-remove)\naccountant: eps_AR = 8, eps_S = 16" in titles
    assert "gap, membership game: not audited" in titles     # the gap case audits the substitute game only
    assert all(ax.get_ylabel().startswith("one-run lower bound") for ax in fig.axes if ax.axison)
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {
        "steinke procedure ((eps, delta)-DP)", "mahloujifar procedure ((eps, delta)-DP)",
        "most possible: every guess right (the procedure's cap at m)", "final-iterate ceiling of the training"}
    # each bar's cap (and ceiling, where its kind has one) is drawn at the table's value
    view = tables.deep_view(table, "loss")
    ceilings = 0
    for ax in fig.axes:
        if not ax.axison:
            continue
        case, game = ax.get_title().split(" game")[0].split(", ")
        cell = view[(view["case"] == case) & (view["game"] == game)].groupby(["kind", "procedure"])
        marks = {m: sorted(float(y) for line in ax.lines if line.get_marker() == m for y in line.get_ydata())
                 for m in ("_", "v")}
        assert marks["_"] == pytest.approx(sorted(cell["perfect"].max()))
        assert marks["v"] == pytest.approx(sorted(cell["ceiling"].max().dropna()))
        ceilings += len(marks["v"])
    assert ceilings > 0
    assert "bars: mean over 3 audits" in fig.get_suptitle()
    assert "m = 256 per input kind, 26,010 white-box canaries" in fig.get_suptitle()
    # a versioned figure: the same bytes whatever state numpy's global generator is in
    drawn = []
    for seed in (1, 2):
        np.random.seed(seed)
        figures.save(figures.deep_one_run(table, "loss", "t"), tmp_path / f"{seed}.png", tmp_path / f"{seed}.pdf")
        drawn.append((tmp_path / f"{seed}.png").read_bytes())
    assert drawn[0] == drawn[1]
