"""Tests for subaudit.estimation.roc: ROC counts and the Mann-Whitney AUC."""

from __future__ import annotations

import numpy as np

from subaudit.estimation import roc


def test_ties_count_as_predict_D():
    # One D run and one D' run share score 1.0: at tau = 1 both are predicted D.
    scores = np.array([3.0, 2.0, 1.0, 1.0, 0.0, -1.0])
    labels = np.array([1, 1, 1, 0, 0, 0])
    thr, fp, fn, n_pos, n_neg = roc.roc_counts(scores, labels.astype(np.int8))
    assert thr.tolist() == [3.0, 2.0, 1.0, 0.0, -1.0]
    assert fp.tolist() == [0, 0, 1, 2, 3]
    assert fn.tolist() == [2, 1, 0, 0, 0]
    assert (n_pos, n_neg) == (3, 3)


def test_mann_whitney_auc_by_brute_force_with_ties():
    pos = np.array([3.0, 1.0, 1.0, 0.0, 5.0])
    neg = np.array([1.0, 2.0, -1.0, 1.0])
    wins = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    assert roc.mann_whitney_auc(pos, neg, 0.0) == wins / 20
    assert roc.mann_whitney_auc(pos, neg, 0.5) == (wins + 0.5 * ties) / 20
