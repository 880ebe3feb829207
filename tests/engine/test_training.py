"""The batched DP training engine against Opacus, and its determinism.

Opacus is the reference: for each run, an Opacus ``GradSampleModule`` +
``DPOptimizer`` is driven with the run's own sampling masks and noise draws
(``RunStreams``: the masks select the batch, Opacus' ``_generate_noise`` is fed
from the run's noise stream) and its parameters after T steps must equal the
engine's.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from subaudit import engine
from subaudit.engine import batching, training
from subaudit.engine import (
    MLP,
    DPConfig,
    GradientCanary,
    InputCanary,
    Records,
    RunStreams,
    init_params,
    train,
)
from conftest import records
from subaudit.validation import ParameterError

opacus = pytest.importorskip("opacus")
from opacus import GradSampleModule  # noqa: E402
from opacus.optimizers import DPOptimizer  # noqa: E402
from opacus.optimizers import optimizer as opacus_optimizer  # noqa: E402

SEED = 20260101


class _CanaryDPOptimizer(DPOptimizer):
    """Opacus' DPOptimizer plus Algorithm 1 line 15: g_z added when the canary is sampled."""

    canary_step: list[torch.Tensor] | None = None

    def clip_and_accumulate(self) -> None:
        super().clip_and_accumulate()
        if self.canary_step is not None:
            for p, g in zip(self.params, self.canary_step):
                p.summed_grad += g


def _opacus_run(model: MLP, data: Records, canary, dp: DPConfig, run: int, bit: int,
                init, dtype, monkeypatch, device: str = "cpu", noise=None) -> list[torch.Tensor]:
    """One run trained by Opacus on ``device`` with the run's masks and noise draws
    (``noise(streams)``: the step's P standard normals, if not drawn as P values)."""
    streams = RunStreams(SEED, run, device)
    module = model.torch_module().to(device, dtype)
    with torch.no_grad():
        for p, p0 in zip(module.parameters(), init_params(model, [streams], init, dtype)):
            p.copy_(p0[0])
    gsm = GradSampleModule(module, loss_reduction="mean")
    base = (torch.optim.SGD(gsm.parameters(), lr=dp.lr) if dp.optimizer == "sgd" else
            torch.optim.Adam(gsm.parameters(), lr=dp.lr, betas=dp.betas, eps=dp.eps))
    n = data.x.shape[0]
    n_records = n + (canary is not None)
    opt = _CanaryDPOptimizer(
        base, noise_multiplier=dp.noise_multiplier, max_grad_norm=dp.clip,
        expected_batch_size=dp.sampling_rate * n_records, loss_reduction="mean")

    x, y = data.x.to(device), data.y.to(device)
    if isinstance(canary, InputCanary):
        x = torch.cat([x, canary.x[0 if bit else 1][None].to(device)])
        y = torch.cat([y, canary.y[0 if bit else 1][None].to(device)])
    shapes = model.shapes
    offsets = np.cumsum([0] + [math.prod(s) for s in shapes])
    pending: list[torch.Tensor] = []

    def fed_noise(std, reference, generator=None, secure_mode=False):
        if not pending:
            xi = (streams.draw_noise(torch.empty(model.num_params, dtype=dtype, device=device))
                  if noise is None else noise(streams))
            pending.extend(xi[lo:hi].reshape(s) for s, lo, hi in
                           zip(shapes, offsets[:-1], offsets[1:]))
        return std * pending.pop(0).view(reference.shape)

    monkeypatch.setattr(opacus_optimizer, "_generate_noise", fed_noise)
    criterion = torch.nn.CrossEntropyLoss()
    for _ in range(dp.steps):
        if dp.sampling_rate == 1.0:
            mask = torch.ones(n_records, dtype=torch.bool, device=device)
        else:
            mask = streams.draw_uniform(torch.empty(n_records, device=device)) < dp.sampling_rate
        opt.canary_step = None
        rows = mask.clone()
        if isinstance(canary, GradientCanary):
            rows = mask[:n]
            if mask[n]:
                g = canary.g[0 if bit else 1].to(device, dtype)
                opt.canary_step = [g[lo:hi].reshape(s) for s, lo, hi in
                                   zip(shapes, offsets[:-1], offsets[1:])]
        assert rows.any(), "pick a seed without empty batches"
        opt.zero_grad()
        criterion(gsm(x[rows]), y[rows]).backward()
        opt.step()
        assert not pending
    return [p.detach().clone() for p in gsm._module.parameters()]


CASES = [
    # model sizes, optimizer, canary kind, q, init, batching
    ((12, 4), "sgd", "gradient", 1.0, "zero", "dense"),
    ((12, 4), "sgd", "input", 0.5, "zero", "dense"),
    ((12, 4), "adam", "input", 1.0, "zero", "dense"),
    ((12, 7, 4), "adam", "input", 0.5, "random", "dense"),
    ((12, 7, 4), "adam", "gradient", 0.5, "random", "gather"),
    ((12, 7, 4), "sgd", "input", 0.5, "random", "gather"),
    ((12, 7, 4), "sgd", "gradient", 1.0, "given", "dense"),
    ((12, 4), "sgd", "input", 0.5, "zero", "sampled"),
    ((12, 4), "adam", "gradient", 0.5, "random", "sampled"),
    ((12, 4), "sgd", "input", 0.5, "zero", "per-run"),
    ((12, 4), "sgd", "gradient", 1.0, "zero", "per-run"),
    ((12, 7, 4), "adam", "input", 0.5, "random", "per-run"),
    ((12, 7, 4), "adam", "gradient", 0.5, "random", "per-run"),
    ((12, 7, 5, 4), "sgd", "input", 1.0, "given", "per-run"),
]


@pytest.mark.parametrize("sizes,optimizer,kind,q,init,batching", CASES)
def test_engine_equals_opacus(sizes, optimizer, kind, q, init, batching, monkeypatch):
    model = MLP(sizes)
    n = 24
    data = records(n, sizes[0], sizes[-1], seed=1)
    if kind == "input":
        canary = InputCanary(torch.randn(2, sizes[0], dtype=torch.float64) * 3,
                             torch.tensor([1, 3]))
    else:
        canary = GradientCanary.one_hot(model, model.num_params - 3, clip=1.5)
    if init == "given":
        g = torch.Generator().manual_seed(5)
        init = [torch.randn(s, generator=g, dtype=torch.float64) * 0.2 for s in model.shapes]
    dp = DPConfig(steps=6, sampling_rate=q, noise_multiplier=0.7, clip=1.5,
                  lr=0.05 if optimizer == "sgd" else 0.01, optimizer=optimizer)
    runs, bits = [0, 1, 2, 3], [1, 0, 1, 0]
    res = train(model, data, canary, dp, seed=SEED, runs=runs, bits=bits, score_every=3,
                init=init, batching=batching, dtype=torch.float64, keep_params=True,
                progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, (run, bit) in enumerate(zip(runs, bits)):
            ref = _opacus_run(model, data, canary, dp, run, bit, init, torch.float64,
                              monkeypatch)
            for mine, theirs in zip(res.params, ref):
                np.testing.assert_allclose(mine[i], theirs.numpy(), rtol=1e-9, atol=1e-11)
            # The final score, recomputed from Opacus' parameters.
            if kind == "input":
                module = model.torch_module().double()
                with torch.no_grad():
                    for p, v in zip(module.parameters(), ref):
                        p.copy_(v)
                    logits = module(canary.x)
                expect = float(logits[0, 1] - logits[1, 3])
            else:
                j = model.num_params - 3
                flat0 = torch.cat([p[0].reshape(-1) for p in
                                   init_params(model, [RunStreams(SEED, run)], init,
                                               torch.float64)])
                flat = torch.cat([p.reshape(-1) for p in ref])
                expect = float(flat0[j] - flat[j])
            assert res.scores[-1, i] == pytest.approx(expect, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("kind", ["input", "gradient"])
def test_span_training_is_full_training_with_that_noise(kind, monkeypatch):
    """A linear head trained in the span of its records and canary scores exactly as full
    training (Opacus) whose weight noise is the span noise plus any noise orthogonal to it:
    the orthogonal part never reaches a score, so the score distribution is the same."""
    model = MLP((40, 3))
    data = records(12, 40, 3, seed=11)
    if kind == "input":
        canary = InputCanary(torch.randn(2, 40, dtype=torch.float64), torch.tensor([0, 2]))
    else:
        canary = GradientCanary.one_hot(model, 41, clip=1.5)      # weight[1, 1]
    dp = DPConfig(steps=8, sampling_rate=0.5, noise_multiplier=0.8, clip=1.5, lr=0.1)
    runs, bits = [0, 1, 2, 3], [1, 0, 1, 0]
    kw = dict(seed=SEED, runs=runs, bits=bits, score_every=4, init="random",
              dtype=torch.float64, progress=False)
    span = train(model, data, canary, dp, basis="span", **kw).scores
    assert np.array_equal(train(model, data, canary, dp, **kw).scores, span)   # auto: the span
    assert not np.allclose(train(model, data, canary, dp, basis="full", **kw).scores, span)

    basis = engine.span_basis(model, data, canary)
    v = basis.shape[1]
    assert v == 12 + (2 if kind == "input" else 1)
    q_full = torch.linalg.svd(basis @ basis.T - torch.eye(40, dtype=torch.float64))[0]
    rest = q_full[:, :40 - v]                                    # orthonormal complement
    assert torch.allclose(rest.T @ basis, torch.zeros(40 - v, v, dtype=torch.float64), atol=1e-12)
    other = torch.Generator().manual_seed(3)

    def noise(streams):
        xi = streams.draw_noise(torch.empty(3 * v + 3, dtype=torch.float64))
        w = xi[:3 * v].reshape(3, v) @ basis.T
        w += torch.randn(3, 40 - v, generator=other, dtype=torch.float64) @ rest.T
        return torch.cat([w.reshape(-1), xi[3 * v:]])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, (run, bit) in enumerate(zip(runs, bits)):
            ref = _opacus_run(model, data, canary, dp, run, bit, "random", torch.float64,
                              monkeypatch, noise=noise)
            if kind == "input":
                logits = canary.x @ ref[0].T + ref[1]
                expect = float(logits[0, 0] - logits[1, 2])
            else:
                start = init_params(model, [RunStreams(SEED, run)], "random", torch.float64)
                expect = float(start[0][0, 1, 1] - ref[0][1, 1])
            assert span[-1, i] == pytest.approx(expect, rel=1e-9, abs=1e-12)


def test_span_basis_is_refused_where_it_would_be_wrong():
    for over in (dict(dp=DPConfig(steps=2, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0,
                                  lr=0.1, optimizer="adam")),
                 dict(keep_params=True), dict(model=MLP((4, 5, 3)))):
        with pytest.raises(ParameterError, match="span"):
            _train_with(basis="span", **over)


def test_float32_close_to_opacus(monkeypatch):
    """The default dtype agrees with Opacus in float32 within float tolerance."""
    model = MLP((30, 10))
    data = records(40, 30, 10, seed=2, dtype=torch.float32)
    canary = InputCanary(data.x[:2] * 2, torch.tensor([0, 9]))
    dp = DPConfig(steps=20, sampling_rate=0.25, noise_multiplier=1.0, clip=1.0, lr=0.1)
    res = train(model, data, canary, dp, seed=SEED, runs=[7], bits=[1], score_every=20,
                keep_params=True, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _opacus_run(model, data, canary, dp, 7, 1, "zero", torch.float32, monkeypatch)
    for mine, theirs in zip(res.params, ref):
        np.testing.assert_allclose(mine[0], theirs.numpy(), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- determinism

IMAGE = dict(sizes=(768, 10), n=500, q=1.0, batching="dense")
SAMPLED = dict(sizes=(768, 10), n=500, q=0.0625, batching="sampled")
TABULAR = dict(sizes=(120, 32, 8), n=400, q=0.125, batching="gather")
WORKLOADS = {"image-head": IMAGE, "image-head-small-q": SAMPLED, "tabular-mlp": TABULAR}


def _workload(w, steps=3):
    model = MLP(w["sizes"])
    data = records(w["n"], w["sizes"][0], w["sizes"][-1], seed=4, dtype=torch.float32)
    canary = InputCanary(data.x[:2].clone() * 2, torch.tensor([0, 1]))
    dp = DPConfig(steps=steps, sampling_rate=w["q"], noise_multiplier=1.0, clip=1.0, lr=0.1,
                  optimizer="adam" if w is TABULAR else "sgd")
    return model, data, canary, dp


def _scores(w, runs, memory_mb=2048, init="zero"):
    model, data, canary, dp = _workload(w)
    runs = np.asarray(runs)
    return train(model, data, canary, dp, seed=9, runs=runs, bits=runs % 2, score_every=1,
                 init=init, batching=w["batching"], memory_mb=memory_mb,
                 progress=False).scores


@pytest.mark.parametrize("w", WORKLOADS.values(), ids=WORKLOADS.keys())
def test_run_scores_do_not_depend_on_the_batch(w, monkeypatch):
    init = "random" if w is TABULAR else "zero"
    with monkeypatch.context() as m:
        m.setattr(training, "CPU_CHUNK_BYTES", float("inf"))               # no cache bound
        shard = _scores(w, np.arange(1000), memory_mb=10**6, init=init)    # one chunk of 1,000
    small = _scores(w, np.arange(1000), memory_mb=1e-3, init=init)         # chunks of 16
    seven = _scores(w, [3, 998, 10, 500, 7, 11, 0], init=init)
    alone = _scores(w, [500], init=init)
    assert np.array_equal(shard, small)
    assert np.array_equal(seven, shard[:, [3, 998, 10, 500, 7, 11, 0]])
    assert np.array_equal(alone[:, 0], shard[:, 500])


def test_one_thread_cpu_chunks_fit_the_cache():
    """On one CPU thread a chunk holds as many aligned blocks as fit
    :data:`training.CPU_CHUNK_BYTES` (at least one), however large the memory budget;
    ``memory_mb`` still bounds it below; with more threads only ``memory_mb`` does."""
    model, data, canary, dp = _workload(TABULAR, steps=1)
    chunks = []
    threads = torch.get_num_threads()

    def sizes(memory_mb):
        chunks.clear()
        train(model, data, canary, dp, seed=9, runs=np.arange(1000), bits=np.arange(1000) % 2,
              score_every=1, init="random", memory_mb=memory_mb, progress=False,
              observe=lambda t, params, grads: chunks.append(params[0].shape[0]))
        return list(chunks)

    setup = batching.Setup(model, data, canary, dp, batching.BATCHINGS["gather"], engine.gather_slots(400, 0.125, 1e-3),
                           0, torch.device("cpu"), torch.float32, model, None)
    per_run = batching.bytes_per_run(setup, 402)
    blocks = training.CPU_CHUNK_BYTES // per_run // engine.MIN_CHUNK
    assert 1 <= blocks < 1000 // engine.MIN_CHUNK          # the cache bound is the binding one
    torch.set_num_threads(1)
    try:
        got = sizes(10**6)                                 # runs 0..999: 63 blocks, the last half used
        assert got[:-1] == [blocks * engine.MIN_CHUNK] * (len(got) - 1) and len(got) == -(-63 // blocks)
        assert sum(got) == 1000
        assert sizes(1e-3) == [engine.MIN_CHUNK] * 62 + [8]  # a tiny budget: one block per chunk
        torch.set_num_threads(2)
        assert sizes(10**6) == [1000]                      # more threads: one chunk within memory_mb
    finally:
        torch.set_num_threads(threads)


_THREADS_SCRIPT = """
import sys, numpy as np, torch
torch.set_num_threads(int(sys.argv[1]))
sys.path[:0] = [sys.argv[2], sys.argv[2] + "/.."]   # this file, and tests/ for conftest
import test_training as t
np.save(sys.argv[3], t._scores(t.WORKLOADS[sys.argv[4]], np.arange(40)))
"""


@pytest.mark.parametrize("name", ["image-head", "image-head-small-q"])
def test_run_scores_do_not_depend_on_the_thread_count(tmp_path, name):
    here = str(__import__("pathlib").Path(__file__).parent)
    out = []
    for threads in (1, 2):
        path = tmp_path / f"s{threads}.npy"
        subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, str(threads), here, str(path), name],
                       check=True)
        out.append(np.load(path))
    assert np.array_equal(out[0], out[1])


def test_noise_stream_is_the_same_in_blocks():
    """Drawing P values per step is what the engine does; the stream depends on nothing else."""
    a, b = RunStreams(1, 5), RunStreams(1, 5)
    first = [a.draw_noise(torch.empty(50)) for _ in range(3)]
    again = [b.draw_noise(torch.empty(50)) for _ in range(3)]
    assert all(torch.equal(x, y) for x, y in zip(first, again))
    assert not torch.equal(first[0], first[1])
    assert not torch.equal(RunStreams(1, 6).draw_noise(torch.empty(50)), first[0])


def _small_mlp_scores(batching: str = "auto", device: str = "cpu", runs=range(20)) -> np.ndarray:
    model = MLP((20, 16, 3))
    data = records(200, 20, 3, seed=6, dtype=torch.float64)
    canary = InputCanary(data.x[:2].clone(), torch.tensor([0, 2]))
    dp = DPConfig(steps=8, sampling_rate=0.1, noise_multiplier=0.5, clip=1.0, lr=0.05,
                  optimizer="adam")
    return train(model, data, canary, dp, seed=3, runs=runs, bits=np.asarray(runs) % 2,
                 score_every=4, init="random", batching=batching, dtype=torch.float64,
                 device=device, progress=False).scores


def test_gather_overflow_is_exact_and_per_run(monkeypatch):
    """Records beyond a run's gather slots go through overflow slots of its block only:
    the same training (to rounding) as slots covering every batch, and a run's scores
    still depend on nothing but its own draws."""
    wide = _scores(TABULAR, np.arange(64), init="random")
    monkeypatch.setattr(training, "SLOT_MAIN_TAIL", 0.3)       # most blocks overflow each step
    n, q = TABULAR["n"], TABULAR["q"]
    assert engine.gather_slots(n, q, 0.3) < engine.gather_slots(n, q, 1e-3)
    shard = _scores(TABULAR, np.arange(64), init="random")
    np.testing.assert_allclose(shard, wide, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(shard, wide)                      # the overflow path ran
    small = _scores(TABULAR, np.arange(64), memory_mb=1e-3, init="random")
    alone = _scores(TABULAR, [37], init="random")
    assert np.array_equal(shard, small)
    assert np.array_equal(alone[:, 0], shard[:, 37])


def test_dense_and_gather_agree():
    np.testing.assert_allclose(_small_mlp_scores("dense"), _small_mlp_scores("gather"),
                               rtol=1e-10, atol=1e-12)


def test_dense_and_sampled_agree():
    """A linear head trained on the sampled pairs only, as the dense products would."""
    dense = dict(SAMPLED, batching="dense")
    np.testing.assert_allclose(_scores(SAMPLED, np.arange(32)), _scores(dense, np.arange(32)),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ParameterError, match="linear head"):
        _train_with(model=MLP((4, 5, 3)), batching="sampled")


def test_accuracy_and_observe():
    model = MLP((10, 3))
    data = records(300, 10, 3, seed=7, dtype=torch.float32)
    w = torch.randn(3, 10)
    data = Records(data.x, (data.x @ w.T).argmax(1))              # a learnable task
    seen = []
    res = train(model, data, None, DPConfig(steps=30, sampling_rate=0.5, noise_multiplier=0.0,
                                             clip=10.0, lr=0.5),
                seed=1, runs=[0, 1], bits=[0, 1], score_every=10, test=data,
                accuracy_steps=[0, 30], observe=lambda t, p, g: seen.append(t), progress=False)
    assert seen == list(range(1, 31))
    assert res.accuracy.shape == (2, 2)
    assert (res.accuracy[1] > 0.8).all() and (res.accuracy[1] > res.accuracy[0]).all()
    assert np.isnan(res.scores).all()


# ---------------------------------------------------------------- bad input


def _train_with(**over):
    model = over.pop("model", MLP((4, 3)))
    data = over.pop("data", Records(torch.randn(10, 4), torch.randint(0, 3, (10,))))
    canary = over.pop("canary", InputCanary(torch.randn(2, 4), torch.tensor([0, 1])))
    dp = over.pop("dp", DPConfig(steps=2, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0,
                                 lr=0.1))
    kw = dict(seed=0, runs=[0, 1], bits=[0, 1], score_every=1, progress=False) | over
    return train(model, data, canary, dp, **kw)


@pytest.mark.parametrize("build,name", [
    (lambda: _train_with(data=Records(torch.randn(10, 5), torch.zeros(10, dtype=torch.long))),
     "data.x"),
    (lambda: _train_with(data=Records(torch.randn(10, 4), torch.full((10,), 3))), "data.y"),
    (lambda: _train_with(data=Records(torch.randn(10, 4), torch.full((10,), -1))), "data.y"),
    (lambda: _train_with(data=Records(torch.randn(10, 4), torch.zeros(10))), "data.y"),
    (lambda: _train_with(canary=InputCanary(torch.randn(2, 4), torch.tensor([0, 7]))),
     "canary.y"),
    (lambda: _train_with(canary=GradientCanary(torch.ones(2, 15))), "canary.g"),
    (lambda: _train_with(bits=[0, 2]), "bits"),
    (lambda: _train_with(runs=[1, 1]), "runs"),
    (lambda: _train_with(batching="sparse"), "batching"),
    (lambda: _train_with(basis="rotated"), "basis"),
    (lambda: _train_with(accuracy_steps=[5]), "accuracy_steps"),
    (lambda: DPConfig(steps=2, sampling_rate=1.5, noise_multiplier=1.0, clip=1.0, lr=0.1),
     "sampling_rate"),
    (lambda: DPConfig(steps=2, sampling_rate=0.0, noise_multiplier=1.0, clip=1.0, lr=0.1),
     "sampling_rate"),
    (lambda: DPConfig(steps=2, sampling_rate=0.5, noise_multiplier=-1.0, clip=1.0, lr=0.1),
     "noise_multiplier"),
    (lambda: DPConfig(steps=2, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.1,
                      optimizer="rmsprop"), "optimizer"),
    (lambda: MLP((4,)), "sizes"),
])
def test_bad_input_names_the_parameter(build, name):
    with pytest.raises(ParameterError) as err:
        build()
    assert err.value.name == name


def test_gather_slots_cover_the_binomial_tail():
    from scipy import stats
    for n, q in [(500, 0.0625), (5000, 0.25), (30, 0.5)]:
        slots = engine.gather_slots(n, q)
        assert stats.binom.sf(slots, n, q) < 1e-14
        assert slots % 8 == 0 or slots == n
        main = engine.gather_slots(n, q, 1e-3)
        assert stats.binom.sf(main, n, q) < 1e-3 < stats.binom.sf(main - 8, n, q)
    assert engine.gather_slots(500, 1.0) == 500


def test_a_training_job_imports_nothing_heavy_beyond_torch():
    """Start-up is paid by every one of a workflow's hundreds of training jobs: training
    (SGD and Adam, every q) must not pull in torch._dynamo (1.5 s, the torch.optim classes
    do), nor pandas or, at q = 1, scipy.stats (0.3 s and 0.5 s)."""
    code = """
import sys, numpy as np, torch
from subaudit.engine import MLP, DPConfig, GradientCanary, Records, train
from subaudit.pipeline.job_inputs import load_setting
from subaudit.pipeline.score_files import write_scores
x = torch.randn(40, 6); y = torch.arange(40) % 3
for sizes, opt, q in [((6, 3), "sgd", 1.0), ((6, 4, 3), "adam", 1.0), ((6, 4, 3), "adam", 0.25)]:
    model = MLP(sizes)
    dp = DPConfig(steps=2, sampling_rate=q, noise_multiplier=1.0, clip=1.0, lr=0.1, optimizer=opt)
    train(model, Records(x, y), GradientCanary.one_hot(model, 0, 1.0), dp, seed=0,
          runs=np.arange(4), bits=np.arange(4) % 2, score_every=1, init="random", progress=False)
    if q == 1.0:
        print("q1", sorted(m for m in ("torch._dynamo", "pandas", "scipy.stats") if m in sys.modules))
print("all", sorted(m for m in ("torch._dynamo", "pandas") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:3] == ["q1 []", "q1 []", "all []"], out.stdout


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_equals_opacus_with_the_device_draws(monkeypatch):
    """On a GPU the masks and noise are drawn there; Opacus fed the same device draws ends
    at the same parameters, and a run's scores do not depend on its chunk."""
    model = MLP((12, 7, 4))
    data = records(24, 12, 4, seed=1)
    canary = InputCanary(torch.randn(2, 12, dtype=torch.float64) * 3, torch.tensor([1, 3]))
    dp = DPConfig(steps=6, sampling_rate=0.5, noise_multiplier=0.7, clip=1.5, lr=0.01,
                  optimizer="adam")
    res = train(model, data, canary, dp, seed=SEED, runs=[0, 1], bits=[1, 0], score_every=3,
                init="random", dtype=torch.float64, keep_params=True, device="cuda",
                progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, (run, bit) in enumerate([(0, 1), (1, 0)]):
            ref = _opacus_run(model, data, canary, dp, run, bit, "random", torch.float64,
                              monkeypatch, device="cuda")
            for mine, theirs in zip(res.params, ref):
                np.testing.assert_allclose(mine[i], theirs.cpu().numpy(), rtol=1e-9, atol=1e-11)
    chunk = _small_mlp_scores(device="cuda")
    assert np.array_equal(chunk[:, [5]], _small_mlp_scores(device="cuda", runs=[5]))


def test_runs_on_d_are_trained_once_for_several_substitutes_of_one_target():
    """``also``: with every run on D (bit 1), each substitute's scores are those of training
    with that canary alone (the runs never see z'), in full and, with all canaries in the basis,
    in the span; a bit 0 or another target z is refused."""
    model = MLP((30, 3))
    data = records(10, 30, 3, seed=4)
    g = torch.Generator().manual_seed(8)
    z = torch.randn(30, generator=g, dtype=torch.float64)
    pairs = [InputCanary(torch.stack([z, torch.randn(30, generator=g, dtype=torch.float64)]),
                         torch.tensor([1, y])) for y in (1, 2, 0)]
    dp = DPConfig(steps=6, sampling_rate=0.5, noise_multiplier=0.9, clip=1.0, lr=0.1)
    kw = dict(seed=SEED, runs=[0, 2, 4, 6], bits=[1, 1, 1, 1], score_every=3, init="random",
              dtype=torch.float64, progress=False)
    for basis in ("full", "span"):
        res = train(model, data, pairs[0], dp, basis=basis, also=pairs[1:], **kw)
        assert len(res.also) == 2 and res.also[0].shape == res.scores.shape == (2, 4)
        alone = [train(model, data, c, dp, basis="full", **kw).scores for c in pairs]
        if basis == "full":
            for got, want in zip([res.scores, *res.also], alone):
                assert np.array_equal(got, want)
        else:     # other noise coordinates (the basis holds all three z'): other draws, same law
            assert not np.allclose(res.scores, alone[0])
            assert np.isfinite(np.stack(res.also)).all()
    with pytest.raises(ParameterError, match="bits"):
        train(model, data, pairs[0], dp, also=pairs[1:], **{**kw, "bits": [1, 0, 1, 0]})
    other = InputCanary(torch.randn(2, 30, generator=g, dtype=torch.float64), torch.tensor([1, 2]))
    with pytest.raises(ParameterError, match="same z"):
        train(model, data, pairs[0], dp, also=[other], **kw)
