"""Data-trap reconstruction: exact recovery, the construction's prediction, the outcomes."""

from __future__ import annotations

import numpy as np
import pytest

from subaudit.scenarios.reconstruction import (
    OUTCOMES,
    PSNR_RECOVERED,
    build_traps,
    outcome_table,
    predicted_counts,
    psnr,
    recover,
    run_traps,
    unit_table,
)


def test_psnr_closed_form():
    a = np.zeros((2, 4))
    b = np.full((2, 4), 0.1)                     # MSE 0.01 -> 20 dB
    assert psnr(a, b) == pytest.approx([20.0, 20.0])
    assert psnr(a[0], a[0]) == 200.0


def test_recovery_is_the_weight_change_over_the_bias_change():
    rng = np.random.default_rng(0)
    x = rng.random(5)
    w0, b0 = rng.standard_normal((3, 5)), rng.standard_normal(3)
    delta = np.array([0.7, -0.2, 0.0])           # unit 2 never fired
    rec = recover(w0, b0, w0 - delta[:, None] * x, b0 - delta)
    assert np.allclose(rec[:2], x) and np.isnan(rec[2]).all()


def test_predicted_counts_match_a_simulation():
    traps, n, p = 400, 50, 0.02
    pred = predicted_counts(traps, n, p)
    assert sum(pred.values()) == pytest.approx(traps)
    fires = np.random.default_rng(1).random((2000, traps, n)) < p
    k = fires.sum(2)
    sim = {"single": (k == 1).sum(1).mean(), "mixed": (k >= 2).sum(1).mean(), "never": (k == 0).sum(1).mean()}
    for key in pred:
        assert sim[key] == pytest.approx(pred[key], rel=0.02)
    # one rate per unit: the sum of the units' own predictions
    rates = np.r_[np.full(200, 0.01), np.full(200, 0.03)]
    mixed = predicted_counts(traps, n, rates)
    assert mixed["single"] == pytest.approx((predicted_counts(200, n, 0.01)["single"]
                                             + predicted_counts(200, n, 0.03)["single"]))


def test_bias_sits_at_the_quantile_of_the_public_projections():
    public = np.random.default_rng(2).random((20000, 16))
    w, b = build_traps(public, 8, 0.01, seed=3)
    assert np.allclose(np.linalg.norm(w, axis=1), 1.0)
    rates = ((public @ w.T + b) > 0).mean(0)
    assert np.allclose(rates, 0.01, atol=1e-4)


@pytest.fixture(scope="module")
def iid():
    """i.i.d. uniform 'images': units fire independently, as the prediction assumes."""
    rng = np.random.default_rng(4)
    d, n = 36, 100
    private, public, held = rng.random((n, d)), rng.random((40000, d)), rng.random((40000, d))
    labels = rng.integers(0, 3, n)
    result = run_traps(private, labels, public, held, classes=3, traps=400, fire_rate=0.01, lr=0.05,
                       batch=10, epochs=1, seed=5)
    return private, result


def test_single_captures_are_the_images_and_counts_follow_the_prediction(iid):
    private, result = iid
    status = result.status
    units = unit_table(result)
    for j, s in enumerate(status):
        fired = result.fired_by[j]
        if s == "never":
            assert not fired and np.isnan(result.recovered[j]).all()
        elif len(fired) == 1:
            assert s == "single" and result.best_psnr[j] > 100           # exact up to rounding
            assert np.allclose(result.recovered[j], private[fired[0]], atol=1e-9)
        else:
            assert s == "mixed" and units.loc[j, "images_fired"] == len(fired)
    c, pred = result.counts, result.predicted
    assert sum(c[k] for k in ("single", "single, not recovered", "mixed", "never")) == 400
    for key, observed in (("single", c["single"]), ("mixed", c["mixed"]), ("never", c["never"])):
        sd = np.sqrt(pred[key] * (1 - pred[key] / 400))
        assert abs(observed - pred[key]) < 4 * sd, (key, observed, pred[key])
    # mixtures are not the images themselves
    mixed = result.best_psnr[[s == "mixed" for s in status]]
    assert np.median(mixed) < PSNR_RECOVERED
    table = outcome_table(result)
    assert set(table["source"]) == {"observed", "predicted (nominal fire rate)", "predicted (held-out rates)"}
    fired = table[table["outcome"] != OUTCOMES[1]]                 # one, two or more, none: every unit
    assert fired.groupby("source")["units"].sum().round(6).tolist() == [400.0] * 3
    observed = table[table["source"] == "observed"].set_index("outcome")["units"]
    assert observed[OUTCOMES[0]] == c["single"] + c["single, not recovered"]
    assert observed[OUTCOMES[1]] == c["single"] and observed[OUTCOMES[2]] == c["mixed"]
    assert set(table.loc[table["outcome"] == OUTCOMES[1], "source"]) == {"observed"}
