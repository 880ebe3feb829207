"""Throughput of the training engine against Opacus and the machine's matmul rate.

Everything is measured in one process on the same machine: the float32 rate of
a square matrix product (the ceiling), the engine's model-steps per second,
and Opacus training one model at a time (``PrivacyEngine.make_private`` with
Poisson sampling, as the paper's code does; its set-up is counted).  Engine
and Opacus are timed alternately and the best of the repeats is kept, so a
noisy neighbour slows both alike.  Ratios are what the benchmark reports;
absolute numbers vary with the machine.

Beside those rows (all of torch's threads, 256 runs at once), the workloads the default run
trains are measured again the way the workflow's training jobs run them
(:data:`WORKFLOW_JOB`): one thread, a shard of 320 runs, chunked to the cache by
:func:`subaudit.engine.train` itself, with Opacus and the matmul rate on one thread too.

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

from subaudit.devices import fixed_threads
from subaudit.engine import device_streams, generator, kernels
from subaudit.engine import (
    MLP,
    DPConfig,
    GradientCanary,
    Records,
    RunStreams,
    choose_basis,
    choose_batching,
    draw_step,
    train,
)

__all__ = ["DEVICE_RUNS", "GOALS", "WORKFLOW_JOB", "Workload", "WORKLOADS", "draw_seconds", "engine_rate",
           "matmul_gflops", "run_bench", "useful_flops"]


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
    role: str            # "goal": a throughput goal's workload; "default": the default run trains it
    basis: str = "auto"  # engine.train's basis: goals measure the engine in full


#: On a GPU the goal workloads are measured again at these numbers of runs trained at once:
#: a rate that falls as they grow shows a bound other than the device's arithmetic.
DEVICE_RUNS: tuple[int, ...] = (1_024, 4_096, 16_384)


def _default(name: str, sizes: tuple[int, ...], n: int, q: float, optimizer: str = "sgd",
             init: str = "zero") -> Workload:
    return Workload(name, sizes, n, q, optimizer, init, 256, 50, 50, "default")


WORKLOADS: tuple[Workload, ...] = (
    # The goals of the engine (the paper's shapes): ViT-B/16 head, Purchase100 MLP.
    Workload("image head", (768, 10), 500, 1.0, "sgd", "zero", 256, 100, 100, "goal", "full"),
    Workload("image head", (768, 10), 500, 0.0625, "sgd", "zero", 256, 100, 400, "goal", "full"),
    Workload("tabular MLP", (600, 128, 100), 5000, 0.25, "adam", "random", 32, 20, 20, "goal",
             "full"),
    # What the default run (params.yaml) trains: EfficientNet-Lite0 head, MiniLM head, Letter MLP.
    *(_default("image head", (1280, 10), 500, q) for q in (1.0, 0.25, 0.0625)),
    *(_default("text head", (384, 2), 1000, q) for q in (1.0, 0.25)),
    *(_default("tabular MLP", (256, 128, 26), 500, q, "adam", "random") for q in (0.25, 0.0625)),
)

#: How the workflow's training jobs run (``train_shard``: ``threads: 1``, params.yaml's
#: ``natural.shard_size`` runs, ``natural.memory_mb``): the one-thread rows' settings.
WORKFLOW_JOB = {"threads": 1, "runs": 320, "memory_mb": 2048}

#: The engine's throughput goals, each a ratio measured within one bench run.
GOALS: tuple[tuple[str, float], ...] = (
    ("image head q=1: useful FLOPs at >= 50% of the matmul rate", 0.5),
    ("image head q=0.0625: >= 5x the engine's own q=1 model-steps/s", 5.0),
    ("tabular MLP (DP-Adam) q=0.25: useful FLOPs at >= 40% of the matmul rate", 0.4),
)


def useful_flops(sizes: tuple[int, ...], batch: float) -> float:
    """FLOPs of forward + backward of an MLP over ``batch`` records."""
    total = 0.0
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        passes = 2 if i == 0 else 3
        total += passes * 2.0 * batch * fan_in * fan_out
    return total


def matmul_gflops(size: int = 2000, repeats: int = 5, device: str = "cpu") -> float:
    """Best float32 GFLOP/s of a ``size x size`` matrix product."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
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


def engine_rate(w: Workload, steps: int, runs: int, device: str, memory_mb: float = 2048,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """The engine's model-steps per second on ``w``: ``runs`` runs trained together for ``steps``
    steps (after a one-step warm-up), within ``memory_mb``, in seconds of ``clock``."""
    data, _ = _data(w)
    model = MLP(w.sizes)
    canary = GradientCanary.one_hot(model, 0, 1.0)
    kw = dict(seed=0, bits=np.arange(runs) % 2, score_every=steps, init=w.init, progress=False,
              device=device, basis=w.basis, memory_mb=memory_mb)
    train(model, data, canary, _dp(w, 1), runs=np.arange(runs), **kw)       # warm-up
    _sync(device)
    t0 = clock()
    train(model, data, canary, _dp(w, steps), runs=np.arange(runs), **kw)
    _sync(device)
    return runs * steps / (clock() - t0)


def draw_seconds(w: Workload, span: torch.Tensor | None, steps: int, runs: int,
                  device: str) -> tuple[float, float | None]:
    """Seconds the engine spends drawing ``steps`` steps of sampling and noise for ``runs``
    runs (in the span basis ``span``, noise for the span's coordinates only), and on a device
    the generator's kernel launches per step: on a GPU (or the CPU under
    ``SUBAUDIT_STREAMS=device``) the same draws through the same function as in training; on
    the CPU the kernels' draws the way their training consumes them (:func:`kernels.draw_only`,
    or its numpy twin's)."""
    model = MLP(w.sizes if span is None else (span.shape[1], w.sizes[-1]))
    streams = RunStreams.for_runs(0, range(runs), device)
    uniforms = None if w.q == 1.0 else torch.empty(runs, w.n + 1, device=device)
    block = streams[0].block
    if isinstance(block, (kernels.CompiledStreamBlock, generator.NumpyStreamBlock)):   # the CPU's
        draw_only = kernels.draw_only if isinstance(block, kernels.CompiledStreamBlock) else generator.draw_only
        t0 = time.perf_counter()
        draw_only(block, 0 if uniforms is None else w.n + 1, model.num_params, steps)
        return time.perf_counter() - t0, None
    noise = torch.empty(runs, model.num_params, device=device)

    def one_step() -> None:
        draw_step(streams, uniforms, noise)
    one_step()
    _sync(device)
    launched = device_streams.launches()
    t0 = time.perf_counter()
    for _ in range(steps):
        one_step()
    _sync(device)
    return time.perf_counter() - t0, (device_streams.launches() - launched) / steps


def _batching(w: Workload, span: torch.Tensor | None, device: str) -> str:
    """How ``train`` batches the workload (``auto``) on ``device``."""
    model = MLP(w.sizes if span is None else (span.shape[1], w.sizes[-1]))
    return choose_batching("auto", model, w.n, w.q, torch.device(device))


def _span(w: Workload) -> torch.Tensor | None:
    """The span basis the engine trains the workload in, or None (full)."""
    data, _ = _data(w)
    model = MLP(w.sizes)
    return choose_basis(w.basis, model, data, GradientCanary.one_hot(model, 0, 1.0), _dp(w, 1))


def _half_memory_mb(device: str) -> float:
    """Half the device's memory, in MB: the engine's chunk budget for the many-runs rows."""
    return torch.cuda.get_device_properties(torch.device(device)).total_memory / 2 / 2**20


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _opacus_rate(w: Workload, steps: int, device: str) -> float:
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    data, canary_x = _data(w)
    x = torch.cat([data.x, canary_x[:1]]).to(device)
    y = torch.cat([data.y, data.y[:1]]).to(device)

    def one_model(n_steps: int) -> None:
        torch.manual_seed(0)
        module = MLP(w.sizes).torch_module().to(device)
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
        _sync(device)
        t0 = time.perf_counter()
        one_model(steps)
        _sync(device)
    return steps / (time.perf_counter() - t0)


def _goals(rows: list[dict]) -> list[dict]:
    """The throughput goals (:data:`GOALS`) from this run's rows."""
    head, sparse, mlp = rows[:3]
    measured = (head["fraction_of_matmul"],
                sparse["engine_model_steps_per_s"] / head["engine_model_steps_per_s"],
                mlp["fraction_of_matmul"])
    return [{"goal": text, "target": target, "measured": value, "met": bool(value >= target)}
            for (text, target), value in zip(GOALS, measured)]


def _row(w: Workload, runs: int, threads: int, steps: int, opacus_steps: int, repeats: int,
         peak: float, device: str, memory_mb: float = 2048) -> dict:
    """One workload measured at ``runs`` runs at once on ``threads`` threads."""
    eng = opa = 0.0
    for _ in range(repeats):
        eng = max(eng, engine_rate(w, steps, runs, device, memory_mb))
        opa = max(opa, _opacus_rate(w, opacus_steps, device))
    span = _span(w)
    draw, launches = draw_seconds(w, span, steps, runs, device)
    flops = useful_flops(w.sizes, w.q * w.n)
    return {
        **{k: v for k, v in asdict(w).items() if k not in ("steps", "opacus_steps")},
        "runs": runs,
        "threads": threads,
        "basis": "full" if span is None else "span",
        "batching": _batching(w, span, device),
        "engine_model_steps_per_s": eng,
        "opacus_model_steps_per_s": opa,
        "speedup_vs_opacus": eng / opa,
        "useful_gflop_per_model_step": flops / 1e9,
        "engine_gflops": eng * flops / 1e9,
        "matmul_gflops": peak,
        "fraction_of_matmul": eng * flops / 1e9 / peak,
        "randomness_share": min(1.0, draw / (runs * steps / eng)),
        "draw_launches_per_step": launches,
    }


def run_bench(quick: bool = False, progress: Callable[[str], None] | None = None,
              device: str = "cpu") -> dict:
    """Measure every workload on all threads, then (on a CPU) the default run's workloads as
    its training jobs run them (:data:`WORKFLOW_JOB`); the headline figures are the image
    head at q = 1."""
    say = progress or (lambda _msg: None)
    scale = 5 if quick else 1
    repeats = 2 if quick else 3
    say("matmul")
    peak = matmul_gflops(repeats=3 if quick else 10, device=device)
    threads = torch.get_num_threads()
    rows = []
    for w in WORKLOADS:
        say(f"{w.name} {w.sizes} q={w.q}: engine and Opacus, best of {repeats}, interleaved")
        rows.append(_row(w, w.runs, threads, max(2, w.steps // scale),
                         max(4, w.opacus_steps // scale), repeats, peak, device))
    if torch.device(device).type != "cpu":
        for w in (w for w in WORKLOADS if w.role == "goal"):
            for runs in DEVICE_RUNS:
                say(f"{w.name} {w.sizes} q={w.q}: {runs:,} runs at once")
                rows.append(_row(w, runs, threads, max(2, w.steps // scale),
                                 max(4, w.opacus_steps // scale), 1, peak, device, _half_memory_mb(device)))
    else:
        job = WORKFLOW_JOB
        with fixed_threads(job["threads"]):
            say(f"matmul on {job['threads']} thread")
            peak_job = matmul_gflops(repeats=3 if quick else 10, device=device)
            for w in (w for w in WORKLOADS if w.role == "default"):
                say(f"{w.name} {w.sizes} q={w.q}: as a workflow job ({job['runs']:,} runs, "
                    f"{job['threads']} thread)")
                # a fifth of the steps: each step is 1,000 model-steps already
                rows.append(_row(w, job["runs"], job["threads"], max(2, w.steps // (5 * scale)),
                                 max(4, w.opacus_steps // scale), 1 if quick else 2, peak_job,
                                 device, job["memory_mb"]))
    head = rows[0]
    return {
        "quick": quick,
        "machine": {"processor": platform.processor() or platform.machine(),
                    "torch_threads": threads, "torch": torch.__version__,
                    "device": device},
        "matmul_gflops": peak,
        "speedup_vs_opacus": head["speedup_vs_opacus"],
        "fraction_of_matmul": head["fraction_of_matmul"],
        "workloads": rows,
        "goals": _goals(rows),
    }


def format_table(result: dict) -> str:
    """The benchmark as a short text table, then the goals."""
    lines = [f"float32 matmul: {result['matmul_gflops']:.1f} GFLOP/s "
             f"({result['machine']['torch_threads']} threads, {result['machine']['device']})",
             f"{'workload':<13}{'sizes':>16}{'q':>8}{'runs':>6}{'thr':>4}{'basis':>6}{'batching':>9}"
             f"{'engine/s':>11}{'opacus/s':>10}"
             f"{'speed-up':>10}{'GFLOP/s':>9}{'of matmul':>11}{'drawing':>9}{'launches':>9}"]
    for r in result["workloads"]:
        sizes = "-".join(map(str, r["sizes"]))
        lines.append(f"{r['name']:<13}{sizes:>16}{r['q']:>8g}{r['runs']:>6}{r['threads']:>4}"
                     f"{r['basis']:>6}{r['batching']:>9}"
                     f"{r['engine_model_steps_per_s']:>11.1f}"
                     f"{r['opacus_model_steps_per_s']:>10.1f}{r['speedup_vs_opacus']:>9.1f}x"
                     f"{r['engine_gflops']:>9.1f}{r['fraction_of_matmul']:>10.0%}"
                     f"{r['randomness_share']:>9.0%}"
                     + ("" if r.get("draw_launches_per_step") is None else f"{r['draw_launches_per_step']:>9.3g}"))
    lines.append("model-steps per second; useful FLOPs = forward + backward of the full model over "
                 "q*n records (a span-basis head does fewer), as a share of the matmul rate on the row's "
                 "threads; drawing: share of the engine's step time spent drawing sampling and "
                 "noise; launches: the generator's kernel launches per step (a device); rows on 1 thread with "
                 f"{WORKFLOW_JOB['runs']:,} runs: the default run's training jobs")
    for g in result["goals"]:
        lines.append(f"{'met' if g['met'] else 'NOT met':>7}: {g['goal']} "
                     f"(measured {g['measured']:.3g})")
    return "\n".join(lines)
