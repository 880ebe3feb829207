"""The accountants over grids of settings, as the records and tables the workflow stores:
the S1 calibrations, the eps_S / eps_AR ratio grid (Fig A5) and epsilon after each
checkpoint of a natural-data audit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from subaudit.accounting.accountant import epsilon, epsilon_over_steps
from subaudit.accounting.calibration import calibrate_sigma
from subaudit.validation import AccountingRangeError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ratio_grid_row", "s1_calibration", "step_accounting"]


def s1_calibration(target_epsilon: float, q: float, steps: int, delta: float) -> dict[str, Any]:
    """Sigma reaching ``target_epsilon`` under substitute adjacency, with all three accountants."""
    sigma = calibrate_sigma(target_epsilon, q, steps, delta, "substitute")
    sub = epsilon(sigma, q, steps, delta, "substitute")
    ar = epsilon(sigma, q, steps, delta, "add-remove")
    grp = epsilon(sigma, q, steps, delta, "group")
    return {
        "target_epsilon": float(target_epsilon), "q": float(q), "steps": int(steps),
        "delta": float(delta), "sigma": float(sigma),
        "eps_substitute": sub.epsilon, "eps_add_remove": ar.epsilon,
        "eps_group": grp.epsilon, "delta_group_add_remove": grp.delta_add_remove,
    }


def ratio_grid_row(q: float, sigmas: Sequence[float], steps: int, delta: float) -> pd.DataFrame:
    """eps_S, eps_AR and their ratio for one q over several noise multipliers.

    A cell whose epsilon is beyond what the accountant can certify is kept with NaN
    values and the reason in ``note``, so the figure shows a gap rather than a guess.
    """
    import pandas as pd  # here: the package imports without pandas

    rows = []
    for sigma in sigmas:
        row: dict[str, Any] = {"q": float(q), "sigma": float(sigma), "steps": int(steps),
                               "delta": float(delta), "note": ""}
        try:
            row["eps_substitute"] = epsilon(sigma, q, steps, delta, "substitute").epsilon
            row["eps_add_remove"] = epsilon(sigma, q, steps, delta, "add-remove").epsilon
        except AccountingRangeError as err:
            row.update(eps_substitute=np.nan, eps_add_remove=np.nan, note=str(err))
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame["ratio"] = frame["eps_substitute"] / frame["eps_add_remove"]
    return frame[["q", "sigma", "steps", "delta", "eps_add_remove", "eps_substitute", "ratio", "note"]]


def step_accounting(sigma: float, q: float, steps: Sequence[int], delta: float) -> pd.DataFrame:
    """eps_AR and eps_S (accountants) after each checkpoint step, at ``sigma``."""
    import pandas as pd

    sub = epsilon_over_steps(sigma, q, list(steps), delta, "substitute")
    ar = epsilon_over_steps(sigma, q, list(steps), delta, "add-remove")
    return pd.DataFrame({"q": float(q), "sigma": float(sigma), "delta": float(delta),
                         "step": [int(s) for s in steps],
                         "eps_substitute": [e.epsilon for e in sub],
                         "eps_add_remove": [e.epsilon for e in ar]})
