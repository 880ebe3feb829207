"""Data-trap reconstruction: training images read back from a crafted model's weight change.

The threat of an untrusted pretrained model (Feng and Tramer 2024, after Fowl et al.'s
imprint modules): the first layer of an MLP is made of *trap units*, ReLU units with a
random unit direction w_j and a bias at a high quantile of the projections <w_j, x> of
public (auxiliary) images, so that each fires for a small share p of inputs. When the model
is fine-tuned with plain SGD on private images, a unit that fired for exactly one image x
changes by dw_j = -lr sum_t delta_t x and db_j = -lr sum_t delta_t, so dw_j / db_j = x: the
image, exactly. A unit fired by two or more images returns a weighted mix of them; a unit
never fired does not move.

With n private images each firing a unit independently with probability p, the
construction predicts, per unit, P(one image) = n p (1 - p)^(n - 1), P(none) = (1 - p)^n and
P(two or more) the rest (:func:`predicted_counts`). :func:`run_traps` reports what happened
against that prediction; an image counts as recovered when the PSNR of the recovery against
it is at least :data:`PSNR_RECOVERED` dB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from subaudit.seeding import derive_seed
from subaudit.validation import check_count, check_positive, check_probability

__all__ = ["OUTCOMES", "PSNR_RECOVERED", "TrapResult", "build_traps", "outcome_table", "predicted_counts",
           "psnr", "recover", "run_traps", "shown_pairs", "unit_table"]

#: PSNR (dB, pixel range 1) from which a recovery counts as the image itself.
PSNR_RECOVERED = 30.0


def psnr(a: np.ndarray, b: np.ndarray, peak: float = 1.0) -> np.ndarray:
    """Peak signal-to-noise ratio in dB of images ``a`` against ``b`` (last axis: pixels);
    capped at 200 dB (identical images)."""
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2, axis=-1)
    return np.minimum(10.0 * np.log10(peak**2 / np.maximum(mse, 1e-20)), 200.0)


def build_traps(public: np.ndarray, traps: int, fire_rate: float, seed: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(directions (m, d), biases (m,)): random unit directions, each bias minus the
    ``1 - fire_rate`` quantile of the public images' projections on it, so that a unit
    fires (pre-activation > 0) for a share ``fire_rate`` of images like the public ones."""
    m = check_count(traps, "traps")
    p = check_probability(fire_rate, "fire_rate")
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, "traps")))
    w = rng.standard_normal((m, public.shape[1]))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    proj = np.asarray(public, np.float64) @ w.T                         # (N, m)
    return w, -np.quantile(proj, 1.0 - p, axis=0)


def predicted_counts(traps: int, images: int, fire_rate: float | np.ndarray) -> dict[str, float]:
    """Expected units fired by exactly one image, by two or more, and by none, when each of
    ``images`` images fires a unit independently with probability ``fire_rate`` (one rate for
    all ``traps`` units, or one per unit)."""
    p = np.broadcast_to(np.asarray(fire_rate, np.float64), (traps,))
    one = images * p * (1.0 - p) ** (images - 1)
    none = (1.0 - p) ** images
    return {"single": float(one.sum()), "mixed": float((1.0 - one - none).sum()),
            "never": float(none.sum())}


def recover(w0: np.ndarray, b0: np.ndarray, w1: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """Each unit's weight change over its bias change, (m, d); NaN rows for units whose
    bias did not move (never fired)."""
    db = b1 - b0
    out = np.full(w0.shape, np.nan)
    moved = db != 0.0
    out[moved] = (w1[moved] - w0[moved]) / db[moved, None]
    return out


@dataclass(frozen=True)
class TrapResult:
    """What fine-tuning through the traps revealed: per unit the images that fired it, the
    recovery and its PSNR against the closest of them, and the counts beside the
    prediction."""

    fired_by: list[list[int]]          # per unit, the distinct image indices that fired it
    recovered: np.ndarray              # (m, d), NaN where the unit never fired
    best_image: np.ndarray             # (m,) index of the firing image closest to the recovery (-1: none)
    best_psnr: np.ndarray              # (m,) its PSNR in dB (NaN: never fired)
    counts: dict[str, int]
    predicted: dict[str, float]            # from the nominal fire rate
    predicted_held_out: dict[str, float]   # from each unit's rate on held-out images

    @property
    def status(self) -> list[str]:
        """Per unit: 'single' (one image, recovered at >= PSNR_RECOVERED dB), 'single, not
        recovered', 'mixed' (two or more images) or 'never'."""
        out = []
        for fired, q in zip(self.fired_by, self.best_psnr):
            if not fired:
                out.append("never")
            elif len(fired) > 1:
                out.append("mixed")
            else:
                out.append("single" if q >= PSNR_RECOVERED else "single, not recovered")
        return out


def run_traps(private: np.ndarray, labels: np.ndarray, public: np.ndarray, held_out: np.ndarray, *,
              classes: int, traps: int, fire_rate: float, lr: float, batch: int, epochs: int,
              seed: int, head_scale: float = 1.0) -> TrapResult:
    """Fine-tune an MLP (d -> ``traps`` ReLU trap units -> ``classes``) with plain SGD on
    ``private`` images (pixels in [0, 1], (n, d)), shuffled minibatches of ``batch``, and
    read the images back from the trap units (float64 throughout).  The traps are built
    from ``public`` images; ``held_out`` images (neither) measure each unit's actual fire
    rate for the second prediction.

    The head is random with scale ``head_scale`` (it sets the size of each unit's update,
    not the recovery)."""
    n, d = private.shape
    check_positive(lr, "lr")
    check_count(batch, "batch")
    check_count(epochs, "epochs")
    w0, b0 = build_traps(public, traps, fire_rate, seed)
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, "fine-tune")))
    head = torch.from_numpy(rng.standard_normal((classes, traps)) * head_scale / math.sqrt(traps))
    w = torch.from_numpy(w0.copy()).requires_grad_(True)
    b = torch.from_numpy(b0.copy()).requires_grad_(True)
    head.requires_grad_(True)
    x_all = torch.from_numpy(np.asarray(private, np.float64))
    y_all = torch.from_numpy(np.asarray(labels, np.int64))
    fired: list[set[int]] = [set() for _ in range(traps)]
    opt = torch.optim.SGD([w, b, head], lr=lr)
    for _ in range(epochs):
        order = rng.permutation(n)
        for lo in range(0, n, batch):
            idx = order[lo:lo + batch]
            x, y = x_all[idx], y_all[idx]
            pre = x @ w.T + b
            with torch.no_grad():
                for i, j in zip(*np.nonzero((pre > 0).numpy())):
                    fired[j].add(int(idx[i]))
            loss = torch.nn.functional.cross_entropy(torch.relu(pre) @ head.T, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    rec = recover(w0, b0, w.detach().numpy(), b.detach().numpy())
    best_image = np.full(traps, -1)
    best_psnr = np.full(traps, np.nan)
    for j, images in enumerate(fired):
        if images and np.isfinite(rec[j]).all():
            ids = sorted(images)
            q = psnr(rec[j][None], private[ids])
            best_image[j], best_psnr[j] = ids[int(np.argmax(q))], float(q.max())
    fired_by = [sorted(s) for s in fired]
    rates = ((np.asarray(held_out, np.float64) @ w0.T + b0) > 0).mean(0)
    result = TrapResult(fired_by, rec, best_image, best_psnr, {}, predicted_counts(traps, n, fire_rate),
                        predicted_counts(traps, n, rates))
    status = result.status
    counts = {k: status.count(k) for k in ("single", "single, not recovered", "mixed", "never")}
    counts["distinct images recovered"] = len({int(best_image[j]) for j, s in enumerate(status)
                                               if s == "single"})
    return TrapResult(fired_by, rec, best_image, best_psnr, counts, result.predicted,
                      result.predicted_held_out)


#: Outcome names of the figure and its table.
OUTCOMES = ("one image", "one image, recovered (PSNR >= 30 dB)", "two or more images", "never fired")


def outcome_table(result: TrapResult) -> pd.DataFrame:
    """Trap units per outcome (the figure's bars): units fired by one image, of which
    recovered at PSNR >= :data:`PSNR_RECOVERED`, by two or more images, by none; observed,
    predicted by the construction's fire rate and predicted from each unit's rate on held-out
    images (the predictions count images fired, not recoveries: no row for that outcome)."""
    c = result.counts
    rows = [{"outcome": o, "source": "observed", "units": float(v)} for o, v in
            zip(OUTCOMES, (c["single"] + c["single, not recovered"], c["single"], c["mixed"], c["never"]))]
    for source, pred in (("predicted (nominal fire rate)", result.predicted),
                         ("predicted (held-out rates)", result.predicted_held_out)):
        rows += [{"outcome": o, "source": source, "units": float(pred[k])}
                 for o, k in zip(OUTCOMES[:1] + OUTCOMES[2:], ("single", "mixed", "never"))]
    return pd.DataFrame(rows)


def unit_table(result: TrapResult) -> pd.DataFrame:
    """One row per trap unit: its outcome, the images that fired it, the closest one and the
    PSNR of the recovery against it."""
    return pd.DataFrame({"unit": np.arange(len(result.fired_by)), "status": result.status,
                         "images_fired": [len(f) for f in result.fired_by],
                         "fired_by": [" ".join(map(str, f)) for f in result.fired_by],
                         "best_image": result.best_image, "psnr_db": result.best_psnr})


def shown_pairs(result: TrapResult, private: np.ndarray, show: int) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """Up to ``show`` (recovered, original, caption) pairs by unit index: single captures
    (distinct images), and a quarter of them mixes (beside the closest of their images)."""
    status = result.status
    seen: set[int] = set()
    picks: list[int] = []
    for want, quota in (("mixed", show // 4), ("single", show)):
        for j, s in enumerate(status):
            if s == want and int(result.best_image[j]) not in seen and len(picks) < show and quota:
                seen.add(int(result.best_image[j]))
                picks.append(j)
                quota -= 1
    picks.sort(key=lambda j: (status[j] != "single", j))
    return [(result.recovered[j], private[result.best_image[j]],
             f"unit {j}\n{len(result.fired_by[j])} image{'s' if len(result.fired_by[j]) > 1 else ''}\n"
             f"PSNR {min(result.best_psnr[j], 99):.0f}{'+' if result.best_psnr[j] > 99 else ''} dB")
            for j in picks]
