"""Claims: each verdict follows its stated rule, and changing the numbers behind a claim
changes its verdict (tables built by the same functions the workflow uses)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from subaudit.reporting import tables
from scipy import stats

from subaudit.reporting.claims import CLAIMS, Evidence, compare, difference, final_audits, judge_all, paired_t


def natural(audits: dict[tuple[float, str], list[float]], eps_ar: float = 1.0, eps_s: float = 2.0,
            panel: str = "q", pooled: dict[tuple[float, str], float] | None = None) -> pd.DataFrame:
    """A natural-data figure table at steps 5 and 10: audits[(panel value, scenario)] are
    the final-step estimates of the repeats (step 5 is half of them), pooled[...] the final
    step of the repeats pooled into one audit (default: the best repeat)."""
    pooled = pooled or {}
    values = sorted({v for v, _ in audits})
    acc = pd.DataFrame([{panel: v, "q": v if panel == "q" else 1.0, "sigma": 3.0, "delta": 1e-5,
                         "step": t, "eps_substitute": eps_s * t / 10, "eps_add_remove": eps_ar * t / 10}
                        for v in values for t in (5, 10)])
    est = [{panel: v, "q": v if panel == "q" else 1.0, "scenario": s, "repeat": i, "step": t,
            "estimator": "auc", "epsilon": e * t / 10}
           for (v, s), reps in audits.items() for i, e in enumerate(reps) for t in (5, 10)]
    pool = [{panel: v, "q": v if panel == "q" else 1.0, "scenario": s, "step": t, "estimator": "auc",
             "epsilon": pooled.get((v, s), max(reps)) * t / 10, "n_positive": 500 * len(reps),
             "n_negative": 500 * len(reps)} for (v, s), reps in audits.items() for t in (5, 10)]
    return tables.natural_table(acc, est, pool, panel=panel)


def fig2(audit: float = 3.9, group_factor: float = 1.1) -> pd.DataFrame:
    cal = [{"q": 1.0, "target_epsilon": t, "sigma": 10.0 / t, "steps": 10, "delta": 1e-5,
            "eps_substitute": float(t), "eps_add_remove": t / 2.1, "eps_group": group_factor * t}
           for t in (2, 4)]
    est = [{"q": 1.0, "target_epsilon": t, "repeat": r, "step": 10, "estimator": "auc",
            "epsilon": audit * t / 4 + 0.01 * r} for t in (2, 4) for r in range(3)]
    pooled = [{"q": 1.0, "target_epsilon": t, "step": 10, "estimator": "auc", "epsilon": audit * t / 4 + 0.03,
               "n_positive": 300, "n_negative": 300} for t in (2, 4)]
    return tables.fig2_table(cal, est, pooled, "substitute")


def gap_audit(bound: float, repeat: int = 0, score: str = "residual", family: str = "dp") -> list[dict]:
    """The rows of one gap-case training: its white-box canaries' bounds beside eps_AR 3.15."""
    return [{"case": "gap", "game": "substitute", "adjacency": "substitute", "repeat": repeat, "kind": "gradient",
             "score": score, "procedure": procedure, "family": family, "bonferroni": True, "m": 26010,
             "epsilon": bound if procedure == "mahloujifar" else bound - 1.0, "perfect": 8.0, "reference": 7.06,
             "eps_add_remove": 3.15, "eps_substitute": 7.06, "ceiling": 7.5, "test_accuracy": 0.5,
             "sample_rate": 1.0, "steps": 25, "noise_multiplier": 6.67} for procedure in ("steinke", "mahloujifar")]


def deep(gain: float = 0.2, spread: float = 0.02, repeats: int = 3, cases=("scratch", "finetune"),
         games=("membership", "substitute"), gap: tuple[float, ...] = (3.5,)) -> pd.DataFrame:
    """A deep-network figure table: metagradient ``gain`` above mislabeled, the better baseline
    (paired by training; normal per-audit noise of sd ``spread``, seeded), and a training of the
    gap case per bound of ``gap``."""
    rng = np.random.default_rng(0)
    audits = []
    for case in cases:
        for game, adjacency in (g for g in (("membership", "add-remove"), ("substitute", "substitute"))
                                if g[0] in games):
            for r in range(repeats):
                rows = []
                reference = 8.0 if adjacency == "add-remove" else 16.0
                for kind, level in (("random", 0.1), ("mislabeled", 0.15), ("metagradient", 0.15 + gain)):
                    for procedure in ("steinke", "mahloujifar"):
                        rows.append({"case": case, "game": game, "adjacency": adjacency, "repeat": r,
                                     "kind": kind, "score": "loss", "procedure": procedure, "family": "dp",
                                     "bonferroni": True, "m": 256,
                                     "epsilon": level + spread * rng.normal(),
                                     "perfect": 5.0, "reference": reference, "eps_add_remove": 8.0,
                                     "eps_substitute": 16.0,
                                     "ceiling": None, "test_accuracy": 0.8, "sample_rate": 0.04, "steps": 300,
                                     "noise_multiplier": 1.0})
                audits.append(rows)
    audits += [gap_audit(b, r) for r, b in enumerate(gap)]
    return tables.deep_table(audits)


def evidence(**tabs: pd.DataFrame) -> Evidence:
    base = {
        "fig2": fig2(),
        "fig3": natural({(1.0, "S2"): [3.0, 3.1, 2.9], (1.0, "S3"): [2.0, 2.2, 2.1],
                         (0.25, "S2"): [2.0, 2.1, 1.9], (0.25, "S3"): [0.5, 0.6, 0.4]}),
        "fig4": natural({(0.25, "S2"): [3.0, 3.2, 2.8], (0.25, "S3"): [0.3, 0.4, 0.2]}),
        "figA5": pd.DataFrame({"q": [1.0, 1.0, 0.01, 0.01], "sigma": [1.0, 10.0, 1.0, 10.0],
                               "ratio": [3.1, 2.4, 2.2, 2.01]}),
        "figA1": pd.DataFrame({"scenario": ["S2", "S2"], "step": [10, 10],
                               "world": ["trained on D (target z, no canary)", "with the canary"],
                               "accuracy": [0.80, 0.79], "se": [0.01, 0.01], "n_runs": [10, 10]}),
        "figA2": natural({(1.0, "S3"): [2.0, 2.1, 1.9], (4.0, "S3"): [0.5, 0.6, 0.4]}, panel="clip"),
        # the base learning rate (0.001) is not the middle of the grid
        "figA4": natural({(0.0005, "S3"): [1.0, 1.1, 0.9], (0.001, "S3"): [2.0, 2.1, 1.9],
                          (0.002, "S3"): [1.5, 1.4, 1.6], (0.005, "S3"): [0.5, 0.6, 0.4]}, panel="lr"),
        "deep-one-run": deep(),
    }
    base.update(tabs)
    return Evidence(base, "auc", {"fig3": False, "fig4": True}, {"clip": "figA2", "lr": "figA4"},
                    {"clip": 2.0, "steps": 100, "lr": 0.001})


def verdicts(ev: Evidence) -> dict[int, str]:
    return {v.claim: v.status for v in judge_all(ev)}


def test_compare_decides_above_by_the_pooled_bound_and_below_by_a_t_interval():
    audit = {"epsilon": 2.5, "mean": 1.5, "se": 0.1, "n_repeats": 3}
    assert compare(audit, 2.0) == "above"                   # the pooled bound exceeds it
    t2 = 4.302652729911275                                  # t(0.975; 2 df)
    assert compare({**audit, "epsilon": 1.9}, 1.5 + t2 * 0.1 + 1e-9) == "below"
    assert compare({**audit, "epsilon": 1.9}, 1.5 + t2 * 0.1 - 1e-9) == "within error"
    assert compare({**audit, "epsilon": 1.9, "n_repeats": 1, "se": float("nan")}, 3.0) == "unknown"
    assert compare({**audit, "n_repeats": 1, "se": float("nan")}, 2.0) == "above"


def test_difference_is_the_welch_t_interval_of_the_repeats_means():
    a = {"mean": 2.0, "se": 0.1, "n_repeats": 3}
    b = {"mean": 1.0, "se": 0.2, "n_repeats": 5}
    va, vb = 0.01, 0.04
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 4)
    half = stats.t.ppf(0.975, df) * np.sqrt(va + vb)
    assert difference(a, b) == pytest.approx((1.0, 1.0 - half, 1.0 + half))
    assert np.isnan(difference(a, {**b, "n_repeats": 1})[1])


def test_final_audits_read_the_last_step_and_its_accountants():
    f = final_audits(evidence().tables["fig3"], "auc").set_index(["q", "scenario"])
    assert f.loc[(1.0, "S2"), "epsilon"] == pytest.approx(3.1)      # pooled: the best repeat here
    assert f.loc[(1.0, "S2"), "mean"] == pytest.approx(3.0)
    assert f.loc[(1.0, "S2"), "se"] == pytest.approx(0.1 / np.sqrt(3))
    assert (f.loc[(1.0, "S2"), "low"], f.loc[(1.0, "S2"), "high"]) == pytest.approx((2.9, 3.1))
    assert f.loc[(1.0, "S2"), "n_runs"] == 3000
    assert f.loc[(1.0, "S2"), "eps_AR"] == 1.0 and f.loc[(1.0, "S2"), "eps_S"] == 2.0


def test_every_claim_is_supported_by_numbers_that_support_it():
    assert verdicts(evidence()) == dict.fromkeys(CLAIMS, "supported")


def test_changing_the_numbers_behind_a_claim_changes_its_verdict():
    # 1: S1 audits below eps_AR
    assert verdicts(evidence(fig2=fig2(audit=1.0)))[1] == "refuted"
    # 2: group privacy tighter than the accountant
    assert verdicts(evidence(fig2=fig2(group_factor=0.9)))[2] == "refuted"
    # 3: S2 below eps_AR at the largest q
    low = natural({(1.0, "S2"): [0.5, 0.6, 0.4], (1.0, "S3"): [0.4, 0.5, 0.3]})
    assert verdicts(evidence(fig3=low))[3] == "refuted"
    # 3: S2 within error of eps_AR: cannot tell
    noisy = natural({(1.0, "S2"): [0.5, 3.0, 1.0], (1.0, "S3"): [0.4, 0.5, 0.3]},
                    pooled={(1.0, "S2"): 0.9})
    assert verdicts(evidence(fig3=noisy))[3] == "cannot tell"
    # 4: an input canary above eps_AR from scratch
    up = natural({(0.25, "S2"): [3.0, 3.2, 2.8], (0.25, "S3"): [2.0, 2.1, 1.9]})
    assert verdicts(evidence(fig4=up))[4] == "refuted"
    # 5: input canaries stronger at larger C
    rev = natural({(1.0, "S3"): [0.5, 0.6, 0.4], (4.0, "S3"): [2.0, 2.1, 1.9]}, panel="clip")
    flat = natural({(1.0, "S2"): [3.0, 3.1, 2.9], (1.0, "S3"): [0.5, 0.6, 0.4],
                    (0.25, "S2"): [2.0, 2.1, 1.9], (0.25, "S3"): [2.0, 2.2, 2.1]})
    assert verdicts(evidence(figA2=rev, fig3=flat))[5] == "refuted"
    # 5: another learning rate than the base one is stronger
    lr = natural({(0.0005, "S3"): [3.0, 3.1, 2.9], (0.001, "S3"): [2.0, 2.1, 1.9],
                  (0.002, "S3"): [1.5, 1.4, 1.6]}, panel="lr")
    assert verdicts(evidence(figA4=lr, fig3=flat, figA2=rev))[5] == "refuted"
    # 5: one repeat, no error estimate: cannot tell
    one = natural({(1.0, "S3"): [2.0], (4.0, "S3"): [0.5]}, panel="clip")
    one_lr = natural({(0.001, "S3"): [2.0], (0.002, "S3"): [0.5]}, panel="lr")
    assert verdicts(evidence(figA2=one, figA4=one_lr))[5] == "cannot tell"
    # 6: no cell above 2
    a5 = evidence().tables["figA5"].assign(ratio=[1.9, 1.8, 1.7, 1.6])
    assert verdicts(evidence(figA5=a5))[6] == "refuted"
    # 7: the canary costs 5 points of accuracy
    a1 = evidence().tables["figA1"].assign(accuracy=[0.80, 0.75])
    assert verdicts(evidence(figA1=a1))[7] == "refuted"
    # 8: optimised canaries below the baselines; no better beyond the noise; one audit
    assert verdicts(evidence(**{"deep-one-run": deep(gain=-0.3)}))[8] == "refuted"
    assert verdicts(evidence(**{"deep-one-run": deep(gain=0.0, spread=0.3)}))[8] == "cannot tell"
    one = deep(repeats=1, cases=("scratch",), games=("substitute",))
    assert verdicts(evidence(**{"deep-one-run": one}))[8] == "cannot tell"
    # 9: one gap training's valid bound under its eps_AR; no gap training (a lower bound refutes nothing)
    assert verdicts(evidence(**{"deep-one-run": deep(gap=(3.5, 3.0))}))[9] == "cannot tell"
    assert verdicts(evidence(**{"deep-one-run": deep(gap=(3.5, 3.6))}))[9] == "supported"
    assert verdicts(evidence(**{"deep-one-run": deep(gap=())}))[9] == "cannot tell"


def test_claim_9_reads_the_valid_bound_it_names():
    """Only the f-DP procedure's (eps, delta)-curve bound of the residual counts: a DP-SGD-curve
    row, an update row or Steinke's above eps_AR do not make the gap."""
    ev = evidence(**{"deep-one-run": deep(gap=(3.0,))})
    extra = tables.deep_table([gap_audit(9.0, score="update"), gap_audit(9.0, family="dpsgd")])
    both = Evidence({**ev.tables, "deep-one-run": pd.concat([ev.tables["deep-one-run"], extra])}, "auc",
                    ev.natural, ev.ablations, ev.base)
    verdict = {v.claim: v for v in judge_all(both)}[9]
    assert verdict.status == "cannot tell" and verdict.numbers["trainings"] == 1
    assert "3 against eps_AR 3.15" in verdict.reason and verdict.numbers["cap"] == 8.0


def test_claim_5_judges_each_factor_and_names_it():
    """A factor that goes the other way beyond error in most scenarios (and the right way in
    none) is refuted, by name, whatever the others say; one scenario each way cannot tell."""
    flat_q = natural({(1.0, "S2"): [3.0, 3.1, 2.9], (1.0, "S3"): [2.0, 2.2, 2.1], (1.0, "S4"): [1.0, 1.1, 0.9],
                      (0.25, "S2"): [2.0, 2.1, 1.9], (0.25, "S3"): [0.5, 0.6, 0.4], (0.25, "S4"): [0.4, 0.5, 0.3]})
    clip_up = natural({(1.0, "S3"): [0.5, 0.6, 0.4], (4.0, "S3"): [2.0, 2.1, 1.9],
                       (1.0, "S4"): [0.5, 0.7, 0.6], (4.0, "S4"): [1.0, 1.2, 1.1]}, panel="clip")
    v = {x.claim: x for x in judge_all(evidence(fig3=flat_q, figA2=clip_up))}[5]
    assert v.status == "refuted" and "C grows: REFUTED (0 of 2 scenarios weaken beyond error, 2 strengthen" in v.reason
    assert "q falls: SUPPORTED" in v.reason
    assert v.numbers["clip_verdict"] == -1 and v.numbers["q_verdict"] == 1 and v.numbers["lr_verdict"] == 1
    # S4's clip interval by hand, paired by repeat: differences 0.5 - 1.0, 0.7 - 1.2, 0.6 - 1.1
    assert v.numbers["clip_S4_drop"] == pytest.approx(-0.5) and v.numbers["clip_S4_drop_high"] == pytest.approx(-0.5)
    # q's, Welch's: S3 with 3 repeats of sd 0.1 each side
    half = stats.t.ppf(0.975, 4) * np.sqrt(2 * 0.1 ** 2 / 3)
    assert v.numbers["q_S3_drop"] == pytest.approx(1.6) and v.numbers["q_S3_drop_high"] == pytest.approx(1.6 + half)
    split = natural({(1.0, "S3"): [0.5, 0.6, 0.4], (4.0, "S3"): [2.0, 2.1, 1.9],
                     (1.0, "S4"): [1.5, 1.7, 1.6], (4.0, "S4"): [1.0, 1.2, 1.1]}, panel="clip")
    v = {x.claim: x for x in judge_all(evidence(fig3=flat_q, figA2=split))}[5]
    assert v.numbers["clip_verdict"] == 0 and v.status == "cannot tell"


def test_paired_t_is_the_t_interval_of_the_differences():
    mean, lo, hi = paired_t([0.3, 0.1, 0.2])
    half = 4.302652729911275 * 0.1 / np.sqrt(3)  # t(0.975; 2 df) x sd / sqrt(n)
    assert mean == pytest.approx(0.2) and lo == pytest.approx(0.2 - half) and hi == pytest.approx(0.2 + half)
    assert np.isnan(paired_t([0.3])[1])


def test_a_claim_without_its_figure_cannot_tell():
    ev = evidence()
    missing = Evidence({k: v for k, v in ev.tables.items() if k != "figA5"}, "auc",
                       ev.natural, ev.ablations)
    out = {v.claim: v for v in judge_all(missing)}
    assert out[6].status == "cannot tell" and "figA5" in out[6].reason


def test_a_figure_without_a_column_a_claim_reads_cannot_tell_and_names_it():
    ev = evidence()
    tables = {**ev.tables, "figA5": ev.tables["figA5"].drop(columns="ratio"),
              "deep-one-run": ev.tables["deep-one-run"].drop(columns="score")}
    out = {v.claim: v for v in judge_all(Evidence(tables, "auc", ev.natural, ev.ablations, ev.base))}
    assert out[6].status == "cannot tell" and "figA5 lacks ratio" in out[6].reason
    assert out[8].status == "cannot tell" and "deep-one-run lacks score" in out[8].reason
    assert out[2].status == "supported"     # the others are judged as before


def test_claim_8_without_optimised_canaries_says_so():
    ev = evidence()
    deep_table = ev.tables["deep-one-run"]
    out = {v.claim: v for v in judge_all(Evidence({**ev.tables, "deep-one-run": deep_table[
        deep_table["kind"] != "metagradient"]}, "auc", ev.natural, ev.ablations, ev.base))}
    assert out[8].status == "cannot tell" and "metagradient" in out[8].reason


def test_an_error_in_a_claims_own_code_fails_the_report(monkeypatch):
    """A claim reading a column its figure does not have (a misspelt one) is a bug: the report
    fails instead of printing CANNOT TELL; the figure itself has every column the claim declares."""
    from subaudit.reporting.report import build

    ev = evidence()
    claim = CLAIMS[6]

    def misspelt(e: Evidence):
        return "supported", "", {"r": float(e.table("figA5")["ratoi"].max())}

    monkeypatch.setitem(CLAIMS, 6, dataclasses.replace(claim, judge=misspelt))
    assert claim.missing(ev) is None
    with pytest.raises(KeyError, match="ratoi"):
        judge_all(ev)
    with pytest.raises(KeyError, match="ratoi"):
        build(ev.tables, [], estimator="auc", natural=ev.natural, ablations=ev.ablations, base=ev.base, runs=200,
              delta=1e-5, alpha=0.05, settings={})


def test_claim_5_pairs_exactly_the_knobs_the_seeds_leave_out():
    """A factor's ends are compared repeat by repeat only where the workflow gives them the
    same random numbers: the training seeds hold q, not C, T or lr."""
    from subaudit.pipeline.settings import SEED_KEYS
    from subaudit.reporting.claims import FACTORS

    for _, knob, _, paired in FACTORS:
        for purpose in ("train", "target-world"):
            assert (knob not in [k.rstrip("?") for k in SEED_KEYS[purpose]]) == paired, (knob, purpose)


def test_paired_repeats_decide_where_the_repeats_spread_wide():
    """Repeats that differ much from each other but by the same amount between the knob's ends
    (common random numbers): Welch's interval cannot tell, the paired one can."""
    from subaudit.reporting.claims import paired_difference

    wide = natural({(1.0, "S3"): [2.1, 3.1, 4.1], (4.0, "S3"): [2.0, 3.0, 4.0]}, panel="clip")
    f = final_audits(wide, "auc", "clip").set_index("clip")
    assert f.loc[1.0, "repeats"] == "2.1;3.1;4.1"
    welch = difference(f.loc[1.0], f.loc[4.0])
    paired = paired_difference(f.loc[1.0], f.loc[4.0])
    assert welch[1] < 0 < welch[2] and paired == pytest.approx((0.1, 0.1, 0.1))
    v = {x.claim: x for x in judge_all(evidence(figA2=wide))}[5]
    assert v.numbers["clip_verdict"] == 1 and v.numbers["clip_S3_drop_low"] == pytest.approx(0.1)

