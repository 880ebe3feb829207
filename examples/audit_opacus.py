"""Audit your own Opacus training in one run (well under a minute on 2 CPU cores).

1. The auditor makes canary pairs (here: held-out digits with a wrong label, a memorable
   kind) and keeps the secret bits: ``OneRunAudit(pairs, game=..., seed=...)``.
2. You train with Opacus as usual, built by ``audit.make_private`` (the canaries enter through
   the data, Opacus' Poisson sampling and accountant see them, at a sample rate and batch that
   the secret bits cannot change);
   ``audit.attach`` adds white-box gradient canaries inside the DP optimiser's step.
3. ``audit.finish`` scores the canaries from the trained model and returns lower bounds on
   epsilon (Steinke et al. and Mahloujifar et al. procedures, 95% confidence) beside the
   accountant's epsilon of the same training under the game's adjacency.

Run:  python examples/audit_opacus.py [--game substitute|membership] [--steps 150] [--json]
What it prints, for both games: examples/output/ (docs/tutorial.md shows it).
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import torch
from opacus import PrivacyEngine
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import TensorDataset

from subaudit.opacus import OneRunAudit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--game", choices=["substitute", "membership"], default="substitute")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", module="opacus")  # secure-RNG notices
    warnings.filterwarnings("ignore", message="Full backward hook")  # Opacus hooks, inputs need no grad
    torch.manual_seed(0)
    torch.set_num_threads(2)

    digits = load_digits()  # 1,797 8x8 images shipped with scikit-learn
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(digits.target)
    order = torch.from_numpy(np.random.default_rng(0).permutation(len(y)))
    train, pool = order[:1200], order[1200:1600]

    # --8<-- [start:pairs]
    # The auditor's side: 200 pairs of held-out digits, each with a wrong label.
    wrong = (y[pool] + 1 + torch.from_numpy(np.random.default_rng(1).integers(0, 9, len(pool)))) % 10
    records = [(x[i], wrong[k]) for k, i in enumerate(pool.tolist())]  # items like the dataset's
    pairs = list(zip(records[0::2], records[1::2]))
    audit = OneRunAudit(pairs, game=args.game, seed=2026, gradient_canaries=500)
    # --8<-- [end:pairs]

    # --8<-- [start:train]
    # Your training, as usual with Opacus.
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(8 * 64, 10))
    audit.start(model)  # checks Opacus can train it; records initial losses
    engine = PrivacyEngine()
    # Opacus' DP-SGD on the data with the canaries, sampled at 64 / 1,200 whatever the secret bits
    model, optimizer, loader = audit.make_private(
        engine, module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
        base=TensorDataset(x[train], y[train]), batch_size=64, noise_multiplier=0.8, max_grad_norm=1.0)
    audit.attach(optimizer, loader)  # white-box gradient canaries (optional)
    step = 0
    while step < args.steps:
        for xb, yb in loader:
            if step == args.steps:
                break
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            step += 1
    # --8<-- [end:train]

    # --8<-- [start:finish]
    report = audit.finish(model, data_loader=loader, privacy_engine=engine, optimizer=optimizer)
    # --8<-- [end:finish]
    if args.json:
        print(json.dumps({"game": report.game, "adjacency": report.adjacency, "accountant": report.accountant,
                          "history": report.history, "rows": list(report.rows), "text": str(report)}))
    else:
        print(report)


if __name__ == "__main__":
    main()
