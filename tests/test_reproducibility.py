"""A small natural-data audit recomputed on a lower instruction set agrees with the machine's best.

The audit (S2 gradient canary on a linear head with SGD, S3 input canary on a 64-16-5
MLP with Adam and random init, 128 runs, q = 0.5 and 1, sigma calibrated to eps_S = 8,
20 steps scored every 5, auc and paper estimators, plus the S1 simulation and the
accountant) runs in a subprocess once with every library at its best instruction set and
once held to a lower one, both on one thread.  The level is set before import, per library:

* torch's own kernels: ``ATEN_CPU_CAPABILITY`` (avx2; default = no SIMD dispatch);
* subaudit's compiled CPU kernels: ``SUBAUDIT_KERNELS`` (avx2; sse2);
* numpy's SIMD dispatch: ``NPY_DISABLE_CPU_FEATURES`` (its AVX-512, or AVX2 and up, targets);
* OpenBLAS (numpy's BLAS): ``OPENBLAS_CORETYPE`` (Haswell; Nehalem);
* MKL and oneDNN: ``MKL_ENABLE_INSTRUCTIONS`` and ``ONEDNN_MAX_CPU_ISA`` (AVX2; SSE4_2,
  SSE41).  On an AMD EPYC these two change nothing: MKL reports the CPU as non-Intel
  (``mkl_serv_get_cpu_type() == 0``) and then ignores the variable, and oneDNN is not on
  these float32 paths.  On an Intel Xeon MKL takes the lower level.

The test first checks that the lowering took effect (torch's reported capability,
numpy's enabled dispatch targets, the kernels' build).  It then requires: every count of every estimate
and the Clopper-Pearson bounds and mu from them identical; epsilon (mu -> epsilon by
brentq on numpy's exp/log) within 1e-12; thresholds and engine scores within 1e-4 of
the scores' scale; accounting and S1 scores within 1e-8 relative; every CSV cell
identical as text except sigma and epsilon/se, which must agree to those tolerances;
and it lists every CSV cell whose printed text differs.

Measured (Intel Xeon with AVX-512, torch 2.13, numpy 2.4; ``pytest -s`` prints this).  The
engine's compiled kernels give the same bits in every build; what moves is torch's and MKL's
float32 arithmetic around them (canary crafting, a dense head's matrix products, scoring:
MKL honours ``MKL_ENABLE_INSTRUCTIONS`` on Intel CPUs) and numpy's:

AVX512 -> AVX2:
  * engine scores within 2.4e-7 of their scale (S3; 8.6e-8 for S2); 23 of 32 engine
    thresholds move, no count, bound, mu or epsilon does;
  * numpy's AVX-512 float64 exp, log, log1p, expm1, power, sinh, cosh and arcsinh
    differ from its AVX2/libm ones in the last bit.  Accounting (calibrated sigma,
    eps_S, eps_AR) moves by up to 3.6e-11 relative at q = 0.5 (5e-16 at q = 1), S1
    scores by 1.8e-13 of their scale (bitwise at q = 1), 8 S1 thresholds; all counts
    identical.
  * The CSV prints 10 significant digits, so an accountant value that sits near a
    rounding boundary changes its last digit: the eps_AR row at q = 0.5, step 20 reads
    3.988139668 (best) and 3.988139667 (AVX2).  That is the only differing cell.
AVX512 -> DEFAULT (the level below the best of an AVX2-only machine):
  * engine scores within 3.1e-7 of their scale; 27 of 32 engine thresholds move, no
    count does;
  * accounting up to 1.2e-11 relative, S1 scores 2.2e-12 of their scale; CSV cells
    eps_S q = 1 step 10 (5.297803955 vs ...954) and q = 0.5 step 10 (5.298983669 vs
    ...668) differ in the 10th digit, every audit number is identical.
(On the AMD EPYC measured before the kernels, where MKL and oneDNN ignore their variables,
the engine's scores at AVX2 were bitwise those at AVX-512.)

Accountant values also depend on the BLAS thread count, about 3e-11 relative (a
multithreaded ``np.dot`` in the discretisation), enough to move the 10th printed
digit too; both runs here use one thread.  The accountant's own error budget is
5e-4 relative (``REL_EPS_ERROR``), so its last printed digits are not meaningful and
the tolerance for accounting is 1e-8 relative rather than bitwise.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

#: torch.backends.cpu.get_cpu_capability() values, best first, and how to hold every
#: library to each level below the best (set before the libraries are imported).
LEVELS: tuple[str, ...] = ("AVX512", "AVX2", "DEFAULT")
LOWER: dict[str, dict[str, str]] = {
    "AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "SUBAUDIT_KERNELS": "avx2",
             "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
             "OPENBLAS_CORETYPE": "Haswell",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "DEFAULT": {"ATEN_CPU_CAPABILITY": "default", "SUBAUDIT_KERNELS": "sse2",
                "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
                "OPENBLAS_CORETYPE": "Nehalem",
                "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
KNOBS = {k for env in LOWER.values() for k in env}
THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

#: Largest difference allowed, relative to the largest |value| of the quantity:
#: float32 engine scores (and thresholds, which are scores or midpoints of two) ...
TOL_SCORES = 1e-4
#: ... float64 accounting (sigma, eps_S, eps_AR) and S1 scores ...
TOL_ACCOUNTING = 1e-8
#: ... and an audit's epsilon from identical counts (brentq's xtol is 1e-13).
TOL_EPSILON = 1e-12

#: Estimate fields that are score values.
SCORE_VALUED = {"threshold"}

#: The audit, run as ``python -c CODE OUT_DIR``; writes what the workflow writes
#: (estimates JSON, figure CSV through subaudit.artifacts) and the raw numbers behind them.
CODE = r'''
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

torch.set_num_threads(1)

from subaudit import accounting
from subaudit import artifacts as io
from subaudit.accounting.grids import step_accounting
from subaudit.estimation import step_estimates
from subaudit.reporting import tables
from subaudit.scenarios import s1 as worst_case
from subaudit.scenarios.s2 import gradient_canary
from subaudit.engine import MLP, DPConfig, InputCanary, Records, train
from subaudit.pipeline.score_files import run_bits

out = Path(sys.argv[1])
N, D, K, R, T, EVERY = 200, 64, 5, 128, 20, 5
DELTA, ALPHA, TARGET, CLIP = 1e-5, 0.05, 8.0, 1.0
gen = torch.Generator().manual_seed(1234)
data = Records(torch.randn(N, D, generator=gen), torch.randint(0, K, (N,), generator=gen))
pair = InputCanary(torch.randn(2, D, generator=gen), torch.randint(0, K, (1,), generator=gen).repeat(2))
runs = np.arange(R)
bits = run_bits(runs)

arrays, records, acc = {}, [], []
for q in (0.5, 1.0):
    sigma = accounting.calibrate_sigma(TARGET, q, T, DELTA, "substitute")
    cases = {"S2": (MLP((D, K)), "sgd", 0.5, "zero", None),
             "S3": (MLP((D, 16, K)), "adam", 0.05, "random", pair)}
    for name, (model, optimizer, lr, init, canary) in cases.items():
        dp = DPConfig(steps=T, sampling_rate=q, noise_multiplier=sigma, clip=CLIP, lr=lr, optimizer=optimizer)
        if canary is None:
            canary = gradient_canary(model, data, dp, init=init, seed=7)
        res = train(model, data, canary, dp, seed=11, runs=runs, bits=bits, score_every=EVERY,
                    init=init, progress=False)
        arrays[f"scores_{name}_q{q}"] = res.scores
        arrays["steps"] = res.steps
        for rec in step_estimates(res.scores, res.bits, res.steps, DELTA, ALPHA, ["auc", "paper"]):
            records.append({**rec, "scenario": name, "q": q, "repeat": 0})
    table = step_accounting(sigma, q, [int(s) for s in arrays["steps"]], DELTA)
    acc.append(table)
    arrays[f"accounting_q{q}"] = np.array(
        [sigma, accounting.epsilon(sigma, q, T, DELTA, "substitute").epsilon,
         *table["eps_substitute"], *table["eps_add_remove"]])
    s1 = worst_case.simulate_s1(sigma, q, T, 1000, seed=5, checkpoints=[int(s) for s in arrays["steps"]])
    arrays[f"s1_q{q}"] = s1.scores
    for rec in step_estimates(s1.scores, s1.labels, s1.steps, DELTA, ALPHA, ["auc", "paper"]):
        records.append({**rec, "scenario": "S1", "q": q, "repeat": 0})

np.savez(out / "arrays.npz", **arrays)
io.write_json(out / "estimates.json", {"estimates": records})
natural = [r for r in records if r["scenario"] != "S1"]
pooled = [{k: v for k, v in r.items() if k != "repeat"} for r in natural]      # one repeat: itself
io.write_csv(out / "figure.csv", tables.natural_table(pd.concat(acc, ignore_index=True), natural, pooled))

from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

from subaudit.engine import kernels

info = {"torch": torch.backends.cpu.get_cpu_capability(),
        "numpy": [t for t in __cpu_dispatch__ if __cpu_features__.get(t)],
        "kernels": kernels.cpu_variant()}
io.write_json(out / "info.json", info)
'''


def _audit(out: Path, lower: dict[str, str]) -> Path:
    """Run the audit in a fresh interpreter with the knobs ``lower`` (others cleared)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    proc = subprocess.run([sys.executable, "-c", CODE, str(out)], env={**env, **lower, **THREADS},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _load(out: Path) -> dict[str, Any]:
    with np.load(out / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    with open(out / "figure.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {"arrays": arrays, "rows": rows, "csv": (out / "figure.csv").read_bytes(),
            "estimates": json.loads((out / "estimates.json").read_text())["estimates"],
            "info": json.loads((out / "info.json").read_text())}


def _scaled_diff(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| relative to max |a| (0 for two zero arrays)."""
    scale = float(np.max(np.abs(a)))
    return float(np.max(np.abs(a - b))) / scale if scale else float(np.max(np.abs(b)))


@pytest.fixture(scope="module")
def best(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _load(_audit(tmp_path_factory.mktemp("best"), {}))


@pytest.mark.parametrize("level", ["AVX2", "DEFAULT"])
def test_lower_isa_reproduces_audit(best: dict[str, Any], level: str,
                                    tmp_path: Path) -> None:
    top = best["info"]["torch"]
    if top not in LEVELS or LEVELS.index(level) <= LEVELS.index(top):
        pytest.skip(f"{level} is not below this machine's best ({top})")
    low = _load(_audit(tmp_path, LOWER[level]))

    # The lowering took effect (else the comparison below would be vacuous).
    disabled = set(LOWER[level]["NPY_DISABLE_CPU_FEATURES"].split())
    assert low["info"]["torch"] == level, low["info"]
    assert not disabled & set(low["info"]["numpy"]), low["info"]
    assert low["info"]["kernels"] == LOWER[level]["SUBAUDIT_KERNELS"], low["info"]

    a, b = best["arrays"], low["arrays"]
    assert a.keys() == b.keys()
    steps = list(a["steps"])
    # The measurements, as they are made (pytest -s shows them; a failure shows those so far).
    print(f"\n{top} -> {level}: torch {low['info']['torch']}, numpy targets {low['info']['numpy']}\n"
          "  (max difference relative to the largest |value|; accounting: to each value)")

    # Raw numbers: engine scores within TOL_SCORES, accounting and S1 within TOL_ACCOUNTING.
    for key in sorted(a):
        if key == "steps":
            assert np.array_equal(a[key], b[key])
            continue
        if key.startswith("accounting_"):  # positive numbers of different sizes: each relative to itself
            diff = float(np.max(np.abs(a[key] - b[key]) / a[key]))
        else:
            diff = _scaled_diff(a[key], b[key])
        tol = TOL_SCORES if key.startswith("scores_") else TOL_ACCOUNTING
        same = "bitwise" if np.array_equal(a[key], b[key]) else f"{int((a[key] != b[key]).sum())} differ"
        print(f"  {key}: max diff {diff:.2g} of scale ({same})")
        assert diff <= tol, f"{key}: {diff:.3g} > {tol:g}"

    # Estimates: every count and the bounds and mu from them identical; epsilon (mu -> epsilon
    # by brentq on numpy's exp and log) within TOL_EPSILON; the threshold within TOL_SCORES.
    ea, eb = best["estimates"], low["estimates"]
    assert [(r["scenario"], r["q"], r["step"], r["estimator"]) for r in ea] == \
        [(r["scenario"], r["q"], r["step"], r["estimator"]) for r in eb]
    moved = {(family, k): 0 for family in ("engine", "S1") for k in ("epsilon", "threshold")}
    eps_diff = 0.0
    for ra, rb in zip(ea, eb):
        assert ra.keys() == rb.keys()
        where = f"{ra['scenario']} q={ra['q']} step {ra['step']} {ra['estimator']}"
        exact = ra.keys() - SCORE_VALUED - {"epsilon"}
        assert {k: ra[k] for k in exact} == {k: rb[k] for k in exact}, where
        assert abs(ra["epsilon"] - rb["epsilon"]) <= TOL_EPSILON * max(1.0, ra["epsilon"]), where
        key = ("s1_q" if ra["scenario"] == "S1" else f"scores_{ra['scenario']}_q") + str(ra["q"])
        scale = float(np.max(np.abs(a[key][steps.index(ra["step"])]))) or 1.0
        assert abs(ra["threshold"] - rb["threshold"]) <= TOL_SCORES * scale, where
        family = "S1" if ra["scenario"] == "S1" else "engine"
        for k in ("epsilon", "threshold"):
            moved[family, k] += ra[k] != rb[k]
        eps_diff = max(eps_diff, abs(ra["epsilon"] - rb["epsilon"]))
    print(f"  estimates: {len(ea)} records, counts, CP bounds and mu identical; changed "
          + ", ".join(f"{f} {k}: {n}" for (f, k), n in moved.items()) + f" (epsilon by at most {eps_diff:.2g})")

    # Figure CSV: text and counts identical; audit numbers within TOL_EPSILON, accountant numbers and
    # sigma within TOL_ACCOUNTING (as parsed back); every cell whose printed text differs is listed.
    ra_rows, rb_rows = best["rows"], low["rows"]
    assert len(ra_rows) == len(rb_rows) and ra_rows and ra_rows[0].keys() == rb_rows[0].keys()
    changed = []
    for row_a, row_b in zip(ra_rows, rb_rows):
        audit = row_a["scenario"] != ""
        for col in row_a:
            if row_a[col] == row_b[col]:
                continue
            cell = f"q={row_a['q']} step={row_a['step']} {row_a['series']} {col}: {row_a[col]} vs {row_b[col]}"
            changed.append(cell)
            assert col in ("sigma", "epsilon", "se", "mean", "low", "high"), cell
            tol = TOL_EPSILON if audit and col != "sigma" else TOL_ACCOUNTING
            x, y = float(row_a[col]), float(row_b[col])
            assert abs(x - y) <= tol * max(1.0, abs(x)), cell
    same = best["csv"] == low["csv"]
    print(f"  figure CSV: {'byte-identical' if same else 'differs in ' + '; '.join(changed)}")
    assert same == (not changed)
