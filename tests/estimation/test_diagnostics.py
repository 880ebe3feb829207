"""Tests for subaudit.estimation.diagnostics: score summary and reversed scores."""

from __future__ import annotations

import numpy as np
import pytest

from subaudit.estimation import diagnostics, estimate_epsilon

DELTA = 1e-5


def test_score_summary_by_brute_force():
    rng = np.random.default_rng(9)
    pos, neg = rng.normal(2.0, 1, 2000), rng.normal(0, 1, 3000)
    pos[:5] = neg[:5]  # a few ties
    out = diagnostics.score_summary(np.r_[pos, neg], np.r_[np.ones(2000), np.zeros(3000)])
    pairs = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    assert out["auc"] == pytest.approx(pairs, abs=1e-12)
    for fpr, key in ((1e-3, "tpr_at_fpr_0.001"), (1e-2, "tpr_at_fpr_0.01")):
        best = max((np.mean(pos >= t) for t in np.r_[pos, neg, np.inf] if np.mean(neg >= t) <= fpr))
        assert out[key] == pytest.approx(best)
    assert (out["n_positive"], out["n_negative"]) == (2000, 3000)


def test_reversed_evidence():
    rng = np.random.default_rng(10)
    s = np.r_[rng.normal(-1.0, 1, 500), rng.normal(0, 1, 500)]
    y = np.r_[np.ones(500), np.zeros(500)]
    assert estimate_epsilon(s, y, DELTA).epsilon == 0.0
    assert diagnostics.reversed_evidence(s, y, DELTA) == estimate_epsilon(-s, y, DELTA).epsilon > 1.0
    assert diagnostics.reversed_evidence(-s, y, DELTA) == 0.0
