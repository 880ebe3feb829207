"""What the scores say besides epsilon: the usual attack numbers and evidence of reversed scores."""

from __future__ import annotations

from typing import Any

from subaudit.estimation.registry import estimate_epsilon
from subaudit.estimation.roc import mann_whitney_auc, roc_counts, validate_scores_labels

__all__ = ["reversed_evidence", "score_summary"]


def score_summary(scores: Any, labels: Any) -> dict[str, Any]:
    """AUC (ties count 1/2), TPR at FPR 1e-3 and 1e-2 (best threshold rule at or below that FPR)
    and the counts of runs: the numbers users compare attacks by."""
    s, y = validate_scores_labels(scores, labels)
    pos, neg = s[y == 1], s[y == 0]
    _, fp, fn, n_pos, n_neg = roc_counts(s, y)
    fpr = fp / n_neg
    tpr = 1.0 - fn / n_pos

    def tpr_at(limit: float) -> float:
        ok = fpr <= limit
        return float(tpr[ok].max()) if ok.any() else 0.0

    return {"auc": mann_whitney_auc(pos, neg, ties=0.5), "tpr_at_fpr_0.001": tpr_at(1e-3),
            "tpr_at_fpr_0.01": tpr_at(1e-2), "n_positive": n_pos, "n_negative": n_neg}


def reversed_evidence(scores: Any, labels: Any, delta: float, alpha: float = 0.05) -> float:
    """Epsilon the default estimator finds in the NEGATED scores (0 when they are not reversed).

    A positive value means label 0 (``D'``) scores significantly higher than label 1: the
    convention of the paper's own code for some scenarios.  subaudit predicts ``D`` for high
    scores, so such scores give epsilon 0 unless negated.
    """
    s, y = validate_scores_labels(scores, labels)
    return estimate_epsilon(-s, y, delta, alpha).epsilon
