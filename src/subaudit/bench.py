"""Throughput of the training engine against Opacus and the machine's matmul rate.

Everything is measured in one process on the same machine: the float32 rate of
a square matrix product (the ceiling), the engine's model-steps per second,
and Opacus training one model at a time (``PrivacyEngine.make_private`` with
Poisson sampling, as the paper's code does; its set-up is counted).  Engine
and Opacus are timed alternately and the best of the repeats is kept, so a
noisy neighbour slows both alike.  Ratios are what the benchmark reports;
absolute numbers vary with the machine.

"Useful" FLOPs of a model-step are those of a forward and backward pass over
its expected batch (``q n`` records): ``2 B in out`` per linear layer forward,
the same for its weight gradient, and again for the input gradient of every
layer but the first.
"""

from __future__ import annotations

import platform
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from subaudit.engine import MLP, DPConfig, GradientCanary, Records, train

__all__ = ["Workload", "WORKLOADS", "matmul_gflops", "run_bench", "useful_flops"]


@dataclass(frozen=True)
class Workload:
    """One benchmarked training setting."""

    name: str
    sizes: tuple[int, ...]
    n: int
    q: float
    optimizer: str
    init: str
    runs: int            # engine: runs trained at once
    steps: int           # engine steps (quick mode: a fifth)
    opacus_steps: int    # Opacus steps of its one model (quick mode: a fifth)


WORKLOADS: tuple[Workload, ...] = (
    Workload("image head", (768, 10), 500, 1.0, "sgd", "zero", 256, 100, 100),
    Workload("image head", (768, 10), 500, 0.0625, "sgd", "zero", 256, 100, 400),
    Workload("tabular MLP", (600, 128, 100), 5000, 0.25, "adam", "random", 32, 20, 20),
)


def useful_flops(sizes: tuple[int, ...], batch: float) -> float:
    """FLOPs of forward + backward of an MLP over ``batch`` records."""
    total = 0.0
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        passes = 2 if i == 0 else 3
        total += passes * 2.0 * batch * fan_in * fan_out
    return total


def matmul_gflops(size: int = 2000, repeats: int = 5) -> float:
    """Best float32 GFLOP/s of a ``size x size`` matrix product."""
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best / 1e9


def _data(w: Workload) -> tuple[Records, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    d, k = w.sizes[0], w.sizes[-1]
    if len(w.sizes) > 2:      # binary features, like Purchase100
        x = (torch.rand(w.n, d, generator=g) < 0.2).float()
    else:
        x = torch.randn(w.n, d, generator=g) / d**0.5
    return Records(x, torch.randint(0, k, (w.n,), generator=g)), x[:2].clone()


def _dp(w: Workload, steps: int) -> DPConfig:
    return DPConfig(steps=steps, sampling_rate=w.q, noise_multiplier=1.0, clip=1.0,
                    lr=0.01, optimizer=w.optimizer)


def _engine_rate(w: Workload, steps: int, runs: int) -> float:
    data, _ = _data(w)
    model = MLP(w.sizes)
    canary = GradientCanary.one_hot(model, 0, 1.0)
    kw = dict(seed=0, bits=np.arange(runs) % 2, score_every=steps, init=w.init, progress=False)
    train(model, data, canary, _dp(w, 1), runs=np.arange(runs), **kw)       # warm-up
    t0 = time.perf_counter()
    train(model, data, canary, _dp(w, steps), runs=np.arange(runs), **kw)
    return runs * steps / (time.perf_counter() - t0)


def _opacus_rate(w: Workload, steps: int) -> float:
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    data, canary_x = _data(w)
    x = torch.cat([data.x, canary_x[:1]])
    y = torch.cat([data.y, data.y[:1]])

    def one_model(n_steps: int) -> None:
        torch.manual_seed(0)
        module = MLP(w.sizes).torch_module()
        if w.init == "zero":
            for p in module.parameters():
                torch.nn.init.zeros_(p)
        opt_cls = torch.optim.SGD if w.optimizer == "sgd" else torch.optim.Adam
        loader = DataLoader(TensorDataset(x, y), batch_size=max(1, round(w.q * len(x))))
        module, opt, loader = PrivacyEngine().make_private(
            module=module, optimizer=opt_cls(module.parameters(), lr=0.01), data_loader=loader,
            noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=True)
        loss_fn = torch.nn.CrossEntropyLoss()
        done = 0
        while done < n_steps:
            for xb, yb in loader:
                opt.zero_grad()
                loss_fn(module(xb), yb).backward()
                opt.step()
                done += 1
                if done == n_steps:
                    break

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one_model(2)                                                         # warm-up
        t0 = time.perf_counter()
        one_model(steps)
    return steps / (time.perf_counter() - t0)


def run_bench(quick: bool = False, progress: Callable[[str], None] | None = None) -> dict:
    """Measure every workload; the headline figures are the image head at q = 1."""
    say = progress or (lambda _msg: None)
    scale = 5 if quick else 1
    repeats = 2 if quick else 3
    say("matmul")
    peak = matmul_gflops(repeats=3 if quick else 10)
    rows = []
    for w in WORKLOADS:
        say(f"{w.name} q={w.q}: engine and Opacus, best of {repeats}, interleaved")
        eng = opa = 0.0
        for _ in range(repeats):
            eng = max(eng, _engine_rate(w, max(2, w.steps // scale), w.runs))
            opa = max(opa, _opacus_rate(w, max(4, w.opacus_steps // scale)))
        flops = useful_flops(w.sizes, w.q * w.n)
        rows.append({
            **{k: v for k, v in asdict(w).items() if k not in ("steps", "opacus_steps")},
            "engine_model_steps_per_s": eng,
            "opacus_model_steps_per_s": opa,
            "speedup_vs_opacus": eng / opa,
            "useful_gflop_per_model_step": flops / 1e9,
            "engine_gflops": eng * flops / 1e9,
            "fraction_of_matmul": eng * flops / 1e9 / peak,
        })
    head = rows[0]
    return {
        "quick": quick,
        "machine": {"processor": platform.processor() or platform.machine(),
                    "torch_threads": torch.get_num_threads(), "torch": torch.__version__},
        "matmul_gflops": peak,
        "speedup_vs_opacus": head["speedup_vs_opacus"],
        "fraction_of_matmul": head["fraction_of_matmul"],
        "workloads": rows,
    }


def format_table(result: dict) -> str:
    """The benchmark as a short text table."""
    lines = [f"float32 matmul: {result['matmul_gflops']:.1f} GFLOP/s "
             f"({result['machine']['torch_threads']} threads)",
             f"{'workload':<13}{'q':>8}{'engine/s':>11}{'opacus/s':>10}{'speed-up':>10}"
             f"{'GFLOP/s':>9}{'of matmul':>11}"]
    for r in result["workloads"]:
        lines.append(f"{r['name']:<13}{r['q']:>8g}{r['engine_model_steps_per_s']:>11.1f}"
                     f"{r['opacus_model_steps_per_s']:>10.1f}{r['speedup_vs_opacus']:>9.1f}x"
                     f"{r['engine_gflops']:>9.1f}{r['fraction_of_matmul']:>10.0%}")
    lines.append("model-steps per second; useful FLOPs = forward + backward over q*n records")
    return "\n".join(lines)
