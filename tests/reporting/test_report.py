"""The report: verdicts and final-step tables in Markdown and HTML, metrics for DVC."""

from __future__ import annotations

import json

import pytest
from test_claims import evidence

from subaudit import accounting
from subaudit.estimation.ceilings import final_iterate_epsilon
from subaudit.reporting.claims import CLAIMS, final_audits
from subaudit.estimation import finite_r_ceiling
from subaudit.reporting.report import FigureInfo, build, final_step_table, to_html, to_markdown

FIGS = [FigureInfo("fig2", "epsilon-vs-target", "S1 canaries", "Figure 1"),
        FigureInfo("fig3", "epsilon-vs-step", "image audits", "Figure 2"),
        FigureInfo("figA2", "ablation", "clip bound", "Figure A2", panel="clip"),
        FigureInfo("figA5", "ratio-grid", "ratio")]


@pytest.fixture(scope="module")
def report():
    ev = evidence()
    return build(ev.tables, FIGS, estimator="auc", natural=ev.natural, ablations=ev.ablations,
                 base=ev.base, runs=200, delta=1e-5, alpha=0.05, settings={"seed": 1})


def test_final_step_table_sets_audits_beside_accountants_and_ceilings():
    table = final_step_table(evidence().tables["fig3"], "auc", 200, 1e-5, 0.05)
    row = table[(table["q"] == "1") & (table["scenario"] == "S2 crafted gradient")].iloc[0]
    assert row["audit (auc)"] == "3.1 (repeats 2.9–3.1)"   # pooled (the best repeat here), their range
    assert (row["repeats"], row["runs"]) == (3, 3000)
    assert row["eps_AR"] == "1" and row["eps_S (accountant)"] == "2" and row["T"] == 10
    group = accounting.epsilon(3.0, 1.0, 10, 1e-5, "group").epsilon
    assert row["eps_S (group privacy)"] == f"{group:.3g}"
    assert row["final-iterate ceiling"] == f"{final_iterate_epsilon(3.0, 1.0, 10, 1e-5, 'substitute'):.3g}"
    assert row["finite-R ceiling (R = 200)"] == f"{finite_r_ceiling(100, 100, 1e-5, 0.05):.3g}"


def test_markdown_and_html_say_the_same_verdicts(report):
    md, page = to_markdown(report), to_html(report)
    for claim in CLAIMS.values():
        assert claim.text in md and claim.text.replace("'", "&#x27;") in page
    assert md.count("| SUPPORTED |") == len(CLAIMS)
    assert page.count("class='SUPPORTED'") == len(CLAIMS)
    assert "![clip bound](figures/figA2.png)" in md and "src='figures/figA2.png'" in page
    assert "Numbers: figures/fig3.csv" in md
    assert "<script" not in page


def test_metrics_hold_verdict_codes_and_final_step_audits(report):
    m = json.loads(json.dumps(report.metrics))
    assert m["supported"] == len(CLAIMS) and m["refuted"] == 0 and m["estimator"] == "auc"
    assert {k: v["code"] for k, v in m["claims"].items()} == {str(c): 1 for c in CLAIMS}
    assert m["final_step"]["fig3"]["1_S2"] == pytest.approx(3.1)      # the pooled audits
    assert m["final_step"]["figA2"]["4_S3"] == pytest.approx(0.6)


def test_metrics_keep_the_numbers_not_the_tables_digits():
    ev = evidence()
    table = ev.tables["fig3"].copy()
    audits = (table["estimator"] == "auc") & (table["scenario"] == "S2")
    table.loc[audits, "epsilon"] += 0.001234          # 3.101234: "3.1" in a 3-digit table
    rep = build({**ev.tables, "fig3": table}, FIGS, estimator="auc", natural=ev.natural,
                ablations=ev.ablations, base=ev.base, runs=200, delta=1e-5, alpha=0.05, settings={})
    f = final_audits(table, "auc")
    assert rep.metrics["final_step"]["fig3"] == {f"{r['q']:g}_{r['scenario']}": r["epsilon"]
                                                 for _, r in f.iterrows()}
    assert rep.metrics["final_step"]["fig3"]["1_S2"] == pytest.approx(3.101234)


def test_verdicts_need_a_valid_estimator():
    ev = evidence()
    with pytest.raises(ValueError, match="valid estimator"):
        build(ev.tables, FIGS, estimator="paper", natural=ev.natural, ablations=ev.ablations,
              base=ev.base, runs=200, delta=1e-5, alpha=0.05, settings={})


def test_white_box_scores_are_summarised_apart():
    """Gradient canaries read by two scores (update, residual) give two rows of the Table 2
    summary, never one pooled row; input kinds keep the score asked for."""
    import pandas as pd

    from subaudit.reporting.tables import deep_summary, deep_view

    rows = []
    for score, eps in (("update", 1.0), ("residual", 3.0), ("loss", 0.5), ("loss-drop", 9.0)):
        kind = "gradient" if score in ("update", "residual") else "random"
        for repeat in range(2):
            rows.append({"case": "scratch", "game": "substitute", "repeat": repeat, "kind": kind, "score": score,
                         "procedure": "mahloujifar", "family": "dp", "bonferroni": True, "epsilon": eps + repeat,
                         "perfect": 8.0, "ceiling": 7.0 if kind == "gradient" else None, "reference": 7.0})
    table = pd.DataFrame(rows)
    assert set(deep_view(table, "loss")["kind"]) == {"gradient", "gradient (residual)", "random"}
    summary = deep_summary(table, "loss").set_index("kind")
    assert summary.loc["gradient", "scratch avg"] == 1.5 and summary.loc["gradient (residual)", "scratch avg"] == 3.5
    assert summary.loc["random", "scratch avg"] == 1.0
