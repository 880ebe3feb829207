"""From Opacus to a substitute-adjacency audit, end to end (about a minute on 2 CPU cores).

1. Train a linear classifier on scikit-learn's packaged 8x8 digits with Opacus and
   ``PrivacyEngine(accountant="substitute")``, calibrated to eps_S = 4 at delta = 1e-5.
2. Print the epsilon of that training under add/remove and substitute adjacency.
3. Audit the same DP configuration (sigma, q, steps, clip norm, learning rate) with
   subaudit's engine: R trainings, half with a gradient canary +C e_j (the target z), half
   with -C e_j (its substitute z'), on the least-updated coordinate j (the paper's S2);
   score each run by its final parameter along e_j and turn the scores into a lower bound
   on epsilon at 95% confidence with subaudit's valid estimator, beside the final-iterate
   ceiling (the most a test on the final model can show, reached by the worst-case canary).

Run:  python examples/opacus_substitute.py [--runs 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import torch
from opacus import PrivacyEngine
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import subaudit.opacus  # noqa: F401  (registers accountant="substitute" with Opacus)
from subaudit.accounting import epsilon_of_history
from subaudit.scenarios.s2 import gradient_canary
from subaudit.estimation.ceilings import final_iterate_epsilon
from subaudit.engine import MLP, DPConfig, Records, train
from subaudit.estimation import estimate_in_out
from subaudit.pipeline.score_files import run_bits

TARGET_EPSILON, DELTA, CLIP, LR, EPOCHS, BATCH = 4.0, 1e-5, 1.0, 0.5, 3, 50


def digits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """1,500 training and 297 test images, pixels scaled to [0, 1]."""
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.long)
    return x[:1500], y[:1500], x[1500:], y[1500:]


def train_with_opacus(x, y, x_test, y_test) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Linear(x.shape[1], 10)
    engine = PrivacyEngine(accountant="substitute")
    model, opt, loader = engine.make_private_with_epsilon(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=LR),
        data_loader=DataLoader(TensorDataset(x, y), batch_size=BATCH),
        target_epsilon=TARGET_EPSILON, target_delta=DELTA, epochs=EPOCHS, max_grad_norm=CLIP)
    for _ in range(EPOCHS):
        for xb, yb in loader:
            opt.zero_grad()
            if len(xb):  # Poisson sampling can draw an empty batch
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    history = engine.accountant.history
    with torch.no_grad():
        accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
    return {"history": [list(h) for h in history],
            "sigma": opt.noise_multiplier, "q": history[0][1], "steps": engine.accountant.steps,
            "eps_substitute": engine.get_epsilon(DELTA),
            "eps_add_remove": epsilon_of_history(history, DELTA, "add-remove").epsilon,
            "test_accuracy": accuracy}


def audit(x, y, sigma: float, q: float, steps: int, runs: int) -> dict:
    """S2 audit of the same DP configuration; record 0 is the target the canary replaces."""
    model = MLP((x.shape[1], 10))
    data = Records(x[1:], y[1:])
    # Opacus divides by the expected batch size of the full data (1,500 q), as here
    dp = DPConfig(steps=steps, sampling_rate=q, noise_multiplier=sigma, clip=CLIP, lr=LR,
                  expected_batch_size=q * x.shape[0])
    canary = gradient_canary(model, data, dp, seed=1)
    r = np.arange(runs)
    result = train(model, data, canary, dp, seed=2, runs=r, bits=run_bits(r), score_every=steps,
                   progress=False)
    final, bits = result.scores[-1], result.bits
    est = estimate_in_out(final[bits == 1], final[bits == 0], DELTA)
    return {"runs": runs, "estimator": est.estimator, "confidence": 1 - est.alpha,
            "eps_lower_bound": est.epsilon,
            # the most any canary's final-step test can show (worst-case canary, S1)
            "final_iterate_ceiling": final_iterate_epsilon(sigma, q, steps, DELTA, "substitute")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="audit trainings (even)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", module="opacus")  # secure-RNG notice
    warnings.filterwarnings("ignore", message="Full backward hook")
    x, y, x_test, y_test = digits()
    trained = train_with_opacus(x, y, x_test, y_test)
    audited = audit(x, y, trained["sigma"], trained["q"], trained["steps"], args.runs)
    if args.json:
        print(json.dumps({**trained, **audited}))
        return
    print(f"Opacus: sigma = {trained['sigma']:.4g}, q = {trained['q']:.4g}, {trained['steps']} steps, "
          f"test accuracy {trained['test_accuracy']:.1%}")
    print(f"  eps_AR (add/remove) = {trained['eps_add_remove']:.3f} at delta = {DELTA:g}")
    print(f"  eps_S  (substitute) = {trained['eps_substitute']:.3f} at delta = {DELTA:g}")
    print(f"Audit (S2 gradient canary, {audited['runs']} trainings): eps >= "
          f"{audited['eps_lower_bound']:.3f} at {audited['confidence']:.0%} confidence "
          f"(estimator {audited['estimator']}); the final-iterate ceiling is "
          f"{audited['final_iterate_ceiling']:.3f}")


if __name__ == "__main__":
    main()
