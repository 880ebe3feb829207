"""Audit scores and their ROC: validation of (scores, labels), threshold counts, Mann-Whitney AUC.

Conventions used by the estimators
----------------------------------
* Decision rule: at threshold ``tau`` the adversary predicts ``1`` (``D``) when
  ``score >= tau`` and ``0`` otherwise.  Ties therefore count as "predict D".
* ``FPR = FP / #negatives`` (a ``D'`` run predicted ``D``) and
  ``FNR = FN / #positives`` (a ``D`` run predicted ``D'``).
* Candidate thresholds are the distinct observed scores (the ROC thresholds).
  The two trivial rules (predict everything 0 / everything 1) have an upper
  Clopper-Pearson bound of 1 on one of the error rates and hence ``mu = -inf``;
  they never win.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["mann_whitney_auc", "roc_counts", "validate_scores_labels"]


def validate_scores_labels(scores: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """Scores as float64 and labels as int8 (1: ``D``, 0: ``D'``); ``ValueError`` says what is wrong.

    One finite score per run, 1-D, equal lengths, labels 0/1 (or bool), both classes present.
    """
    s = np.asarray(scores, dtype=np.float64)
    y_raw = np.asarray(labels)
    if s.ndim != 1 or y_raw.ndim != 1:
        raise ValueError(
            f"scores and labels must be 1-D arrays, got shapes {s.shape} and {y_raw.shape}"
        )
    if s.shape[0] != y_raw.shape[0]:
        raise ValueError(
            f"scores and labels differ in length: {s.shape[0]} scores, {y_raw.shape[0]} labels"
        )
    if s.shape[0] == 0:
        raise ValueError("no runs: scores and labels are empty")
    if not np.all(np.isfinite(s)):
        bad = int(np.sum(~np.isfinite(s)))
        raise ValueError(f"scores must be finite; {bad} score(s) are NaN or infinite")
    if y_raw.dtype == np.bool_:
        y = y_raw.astype(np.int8)
    else:
        try:
            y_num = y_raw.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("labels must be 0 (D') or 1 (D)") from None
        if not np.all((y_num == 0) | (y_num == 1)):
            raise ValueError("labels must be 0 (D') or 1 (D); found other values")
        y = y_num.astype(np.int8)
    n_pos = int(y.sum())
    n_neg = int(y.shape[0] - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise ValueError(
            "labels contain only one class "
            f"({n_pos} runs on D, {n_neg} runs on D'); both are needed"
        )
    return s, y


def roc_counts(
    s: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Thresholds (distinct scores, descending) with FP and FN counts.

    For threshold ``tau`` the rule is ``predict 1 iff score >= tau``.
    Returns ``thresholds, fp, fn, n_pos, n_neg``.
    """
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    yy = y[order].astype(np.int64)
    tp_cum = np.cumsum(yy)
    fp_cum = np.arange(1, ss.shape[0] + 1) - tp_cum
    n_pos = int(tp_cum[-1])
    n_neg = int(fp_cum[-1])
    # Last index of each block of equal scores: everything up to it is >= that score.
    last = np.flatnonzero(np.r_[ss[:-1] != ss[1:], True])
    thresholds = ss[last]
    fp = fp_cum[last]
    fn = n_pos - tp_cum[last]
    return thresholds, fp, fn, n_pos, n_neg


def mann_whitney_auc(pos: np.ndarray, neg: np.ndarray, ties: float) -> float:
    """Share of (positive, negative) pairs where the positive scores higher; a tie counts ``ties``."""
    neg_sorted = np.sort(neg)
    below = np.searchsorted(neg_sorted, pos, side="left").sum(dtype=np.float64)
    if ties:
        below += ties * (np.searchsorted(neg_sorted, pos, side="right")
                         - np.searchsorted(neg_sorted, pos, side="left")).sum(dtype=np.float64)
    return float(below / (pos.shape[0] * neg.shape[0]))
