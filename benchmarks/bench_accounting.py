"""Benchmark of subaudit.accounting against prv-accountant and dp-accounting.

Times, on this machine and in one run: our substitute and add/remove epsilon calls (caches
cleared before every call, so each is cold), prv-accountant's own add/remove accountant
(PRVAccountant + PoissonSubsampledGaussianMechanism, eps_error 0.01, delta_error
delta/1000, the configuration Opacus uses; and once more at the eps_error of our
add/remove call, for equal accuracy), and dp-accounting's PLD accountant for both
neighbouring relations (value_discretization_interval 1e-3), plus one calibrate_sigma.
Ratios are against prv-accountant's own call. The full run also times a realistic
workload: calibrating sigma for 15 settings and a Fig A5 grid (6 q x 10 sigma, T = 500,
substitute and add/remove).

Usage: .venv/bin/python benchmarks/bench_accounting.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable

from subaudit import accounting as acc

SETTINGS = [
    (1.5, 0.04, 2250, 1e-5),
    (5.578, 0.0625, 500, 1e-5),
    (89.128, 1.0, 500, 1e-5),
]
CALIBRATION = (8.0, 0.0625, 500, 1e-5, "substitute")
# sigma ranges per q giving epsilon_S from about 40 down to 0.5 at T = 500
FIG_A5_SIGMAS = {
    1.0: (5.0, 300.0),
    0.5: (2.5, 150.0),
    0.25: (1.4, 80.0),
    0.125: (0.9, 40.0),
    0.0625: (0.7, 20.0),
    0.01: (0.5, 4.0),
}


def _time(
    fn: Callable[[], float], repeats: int, setup: Callable[[], None] | None = None
) -> tuple[float, float]:
    """Median wall time over ``repeats`` cold calls, and the value of the last call."""
    times = []
    value = float("nan")
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), value


def ours(adjacency: str, sigma: float, q: float, steps: int, delta: float) -> Callable[[], float]:
    return lambda: acc.epsilon(sigma, q, steps, delta, adjacency).epsilon


def prv_own(sigma: float, q: float, steps: int, delta: float, eps_error: float = 0.01) -> Callable[[], float]:
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    def run() -> float:
        prv = PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma)
        accountant = PRVAccountant(
            prvs=[prv], max_self_compositions=[steps], eps_error=eps_error, delta_error=delta / 1000
        )
        return float(accountant.compute_epsilon(delta=delta, num_self_compositions=[steps])[2])

    return run


def pld(relation: str, sigma: float, q: float, steps: int, delta: float) -> Callable[[], float]:
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    rel = NeighboringRelation.REPLACE_ONE if relation == "substitute" else NeighboringRelation.ADD_OR_REMOVE_ONE

    def run() -> float:
        dist = pld_mod.from_gaussian_mechanism(
            standard_deviation=sigma,
            sensitivity=1.0,
            sampling_prob=q,
            value_discretization_interval=1e-3,
            neighboring_relation=rel,
            pessimistic_estimate=True,
        )
        return float(dist.self_compose(steps).get_epsilon_for_delta(delta))

    return run


def workload() -> dict[str, float]:
    """15 calibrations (paper S1 targets) and a Fig A5 grid, cold caches."""
    acc.clear_cache()
    t0 = time.perf_counter()
    for q in (1.0, 0.25, 0.0625):
        for target in (1.0, 2.0, 4.0, 6.0, 8.0):
            acc.calibrate_sigma(target, q, 500, 1e-5, "substitute")
    t_cal = time.perf_counter() - t0
    acc.clear_cache()
    t0 = time.perf_counter()
    n = 0
    for q, (lo, hi) in FIG_A5_SIGMAS.items():
        for i in range(10):
            sigma = lo * (hi / lo) ** (i / 9)  # geometric, epsilon_S from about 40 down to 0.5
            for adjacency in ("substitute", "add-remove"):
                acc.epsilon(sigma, q, 500, 1e-5, adjacency)
                n += 1
    t_grid = time.perf_counter() - t0
    return {"calibrate_15_settings_s": t_cal, "fig_a5_grid_s": t_grid, "fig_a5_grid_calls": n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no workload section")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else 5
    repeats_baseline = 1 if args.quick else 3

    rows = []
    for sigma, q, steps, delta in SETTINGS:
        setting = {"sigma": sigma, "q": q, "steps": steps, "delta": delta}
        setting_args = (sigma, q, steps, delta)
        base_t, base_v = _time(prv_own(sigma, q, steps, delta), repeats_baseline)
        cases = [
            ("prv-accountant add-remove (eps_error 0.01)", base_t, base_v),
            ("subaudit substitute", *_time(ours("substitute", *setting_args), repeats, acc.clear_cache)),
            ("subaudit add-remove", *_time(ours("add-remove", *setting_args), repeats, acc.clear_cache)),
            ("dp-accounting PLD replace-one", *_time(pld("substitute", sigma, q, steps, delta), repeats)),
            ("dp-accounting PLD add-or-remove", *_time(pld("add-remove", sigma, q, steps, delta), repeats)),
        ]
        # prv-accountant at the (much tighter) eps_error our add/remove call uses
        ours_err = acc.epsilon(sigma, q, steps, delta, "add-remove").eps_error
        t, v = _time(prv_own(sigma, q, steps, delta, ours_err), 1)
        cases.append((f"prv-accountant add-remove (eps_error {ours_err:.2g})", t, v))
        for name, t, v in cases:
            rows.append({**setting, "method": name, "median_s": t, "epsilon": v, "ratio_vs_prv": t / base_t})

    target, q, steps, delta, adjacency = CALIBRATION
    cal_t, cal_sigma = _time(
        lambda: acc.calibrate_sigma(target, q, steps, delta, adjacency), 1 if args.quick else 3, acc.clear_cache
    )
    calibration = {
        "target_epsilon": target, "q": q, "steps": steps, "delta": delta, "adjacency": adjacency,
        "sigma": cal_sigma, "median_s": cal_t,
    }
    result = {
        "machine": {
            "python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()
        },
        "repeats": repeats,
        "rows": rows,
        "calibrate_sigma": calibration,
    }
    if not args.quick:
        result["workload"] = workload()

    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'setting':<30} {'method':<46} {'median s':>9} {'x prv':>7} {'epsilon':>9}")
    for r in rows:
        setting = f"s={r['sigma']} q={r['q']} T={r['steps']}"
        print(
            f"{setting:<30} {r['method']:<46} {r['median_s']:9.3f} {r['ratio_vs_prv']:7.3f} {r['epsilon']:9.4f}"
        )
    c = calibration
    print(
        f"calibrate_sigma(target {c['target_epsilon']}, q {c['q']}, T {c['steps']}, {c['adjacency']}): "
        f"sigma {c['sigma']:.4f} in {c['median_s']:.2f} s"
    )
    if "workload" in result:
        w = result["workload"]
        print(
            f"workload: 15 calibrations {w['calibrate_15_settings_s']:.1f} s; "
            f"Fig A5 grid ({w['fig_a5_grid_calls']} epsilon calls) {w['fig_a5_grid_s']:.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
