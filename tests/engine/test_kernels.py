"""The compiled CPU kernels: their generator against the normal and uniform laws, their
arithmetic against the engine's torch path (float64, the same draws), and the same bits from
every build and any split of the runs."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from subaudit.engine import dpsgd, kernels
from subaudit.engine.streams import new_block
from subaudit.engine import MLP, DPConfig, GradientCanary, InputCanary, Records, train
from subaudit.validation import ParameterError

ROOT = Path(__file__).resolve().parents[2]


def _block(seeds, purposes=1):
    """Streams of the generator this process runs: the kernels', or without them their numpy
    twin (the same numbers), so the laws below hold for both."""
    return new_block([[s + 1000 * k for k in range(purposes)] for s in seeds])


#: Tests of the compiled library itself.
needs_kernels = pytest.mark.skipif(not kernels.available(), reason="the compiled kernels are not loaded")


def test_ziggurat_tables_are_the_generators_computation():
    spec = importlib.util.spec_from_file_location("zt", ROOT / "scripts" / "ziggurat_tables.py")
    zt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zt)
    assert (ROOT / "src" / "subaudit" / "engine" / "_ziggurat.h").read_text() == zt.render()
    ki, wi, fi, r = zt.tables()
    # The layers: equal areas V, fi the density at each edge, the base strip's tail beyond R.
    x = np.array(wi[1:], dtype=np.float64) * 2.0**52            # right edges x_1 .. x_255
    assert x[-1] == pytest.approx(r) and np.all(np.diff(x) > 0)
    np.testing.assert_allclose(fi[1:], np.exp(-x**2 / 2), rtol=1e-15)
    v = r * math.exp(-r * r / 2) + math.sqrt(math.pi / 2) * math.erfc(r / math.sqrt(2))
    areas = x[1:] * (np.array(fi[1:-1]) - np.array(fi[2:]))     # strip i between edges i and i+1
    np.testing.assert_allclose(areas, v, rtol=1e-9)


def test_normals_follow_the_normal_law():
    n = 1_000_000
    out = torch.empty(4, n // 4, dtype=torch.float64)
    _block(range(4)).normal(0, out)
    z = out.numpy().ravel()
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / n)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # The tail beyond R = 3.654 comes from the ziggurat's separate tail sampler.
    tail = 2 * stats.norm.sf(3.6541528853610088)
    assert abs((np.abs(z) > 3.6541528853610088).mean() - tail) < 5 * math.sqrt(tail / n)
    assert stats.kstest(np.abs(z[np.abs(z) > 3.0]), stats.truncnorm(3.0, np.inf).cdf).pvalue > 1e-3


def test_float32_normals_are_the_float64_draws_rounded():
    a, b = torch.empty(2, 1001, dtype=torch.float64), torch.empty(2, 1001, dtype=torch.float32)
    _block([5, 6]).normal(0, a)
    _block([5, 6]).normal(0, b)
    assert torch.equal(a.float(), b)


def test_uniforms_are_uniform_on_a_24_bit_grid():
    u = torch.empty(3, 200_001)
    _block(range(3)).uniform(0, u)
    v = u.numpy().ravel()
    assert v.min() >= 0 and v.max() < 1
    assert np.all(v * 2**24 == np.floor(v * 2**24))
    counts = np.bincount((v * 100).astype(int), minlength=100)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_draws_depend_on_the_run_alone():
    """Drawing runs together, alone, in any order of calls: each run's numbers are the same."""
    together = torch.empty(3, 37)
    _block([1, 2, 3]).uniform(0, together)
    for i, seed in enumerate([1, 2, 3]):
        alone = torch.empty(1, 37)
        _block([seed]).uniform(0, alone)
        assert torch.equal(alone[0], together[i])
    # A draw of n values then m equals the same stream's values in other splits at lane 0.
    first = torch.empty(1, 8, dtype=torch.float64)
    blk = _block([9])
    blk.normal(0, first)
    again = torch.empty(1, 8, dtype=torch.float64)
    _block([9]).normal(0, again)
    assert torch.equal(first, again)


def _mlp_case(sizes, sparse: bool, n=40, R=5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    d = sizes[0]
    if sparse:   # one-hot attributes of 4 values each, as the tabular stand-in
        x = torch.zeros(n, d, dtype=dtype)
        cols = torch.randint(0, 4, (n, d // 4), generator=g) + 4 * torch.arange(d // 4)
        x.scatter_(1, cols, 1.0)
    else:
        x = torch.randn(n, d, generator=g, dtype=dtype) * 1.3
    y = torch.randint(0, sizes[-1], (n,), generator=g)
    model = MLP(sizes)
    params = [torch.randn(R, *sh, generator=g, dtype=dtype) * 0.4 for sh in model.shapes]
    weight = torch.rand(R, n, generator=g) < 0.4
    return model, x, y, params, weight


@needs_kernels
@pytest.mark.parametrize("sizes", [(12, 3), (16, 7, 3), (16, 9, 6, 3)])
@pytest.mark.parametrize("sparse", [False, True])
def test_clipped_sum_is_the_torch_path(sizes, sparse):
    model, x, y, params, weight = _mlp_case(sizes, sparse)
    x_sq = (x * x).sum(-1) + 1
    records = kernels.RecordTable(x, y, x_sq)
    assert records.sparse == sparse
    mine = [torch.empty_like(p) for p in params]
    kernels.clipped_sum(params, records, weight, 1.1, mine, 0.3)
    ref = [torch.empty_like(p) for p in params]
    dpsgd.clipped_sum(params, dpsgd.Batch(x, y, x_sq, weight.double(), shared=True), 1.1, 0.3, out=ref)
    for a, b in zip(mine, ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


@needs_kernels
def test_dense_head_middle_is_the_torch_path():
    """A dense linear head with the kernels' softmax, clipping and bias sums between torch's
    products equals the torch path, float64."""
    model, x, y, params, weight = _mlp_case((20, 6), False, n=33, R=7)
    x_sq = (x * x).sum(-1) + 1
    mine = [torch.empty_like(p) for p in params]
    kernels.head_clipped_sum(params, x, y, x_sq, weight.double(), 0.9, mine, 0.25)
    ref = [torch.empty_like(p) for p in params]
    dpsgd.clipped_sum(params, dpsgd.Batch(x, y, x_sq, weight.double(), shared=True), 0.9, 0.25, out=ref)
    for a, b in zip(mine, ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


@needs_kernels
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_noise_step_is_torch_optim_on_the_same_noise(optimizer):
    model, _, _, params, _ = _mlp_case((10, 6, 3), False)
    g = torch.Generator().manual_seed(3)
    grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in params]
    ref_params = [p.clone() for p in params]
    ref_grads = [gr.clone() for gr in grads]
    R = params[0].shape[0]
    block, same = _block(range(R)), _block(range(R))   # the same streams: the same draws
    noise = torch.empty(R, model.num_params, dtype=torch.float64)
    moments = ([torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params])
    dp = DPConfig(steps=3, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.05, optimizer=optimizer)
    ref_moments = ([torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params])
    for t in range(1, 4):
        kernels.noise_step(params, grads, block, 0, 0.7, optimizer, dp.lr, moments=moments, step=t)
        same.normal(0, noise)
        dpsgd.add_noise(ref_grads, noise, 0.7)
        if optimizer == "sgd":
            dpsgd.sgd_update(ref_params, ref_grads, dp.lr)
        else:
            dpsgd.adam_update(ref_params, ref_grads, ref_moments, t, dp.lr, dp.betas, dp.eps)
        for a, b in zip(params, ref_params):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
        for a, b in zip(grads, ref_grads):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


@needs_kernels
@pytest.mark.parametrize("kind", ["input", "gradient"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_per_run_training_is_the_torch_path_on_one_hot_records(kind, optimizer):
    """Whole trainings by the kernels (sparse first layer) equal the torch path's with the
    same draws, float64."""
    model, x, y, _, _ = _mlp_case((24, 8, 5), True, n=30)
    data = Records(x, y)
    if kind == "input":
        canary = InputCanary(x[:2].clone(), torch.tensor([1, 4]))
    else:
        canary = GradientCanary.one_hot(model, 7, clip=0.8)
    dp = DPConfig(steps=7, sampling_rate=0.3, noise_multiplier=0.9, clip=0.8, lr=0.05, optimizer=optimizer)
    kw = dict(seed=4, runs=np.arange(20), bits=np.arange(20) % 2, score_every=3, init="random",
              dtype=torch.float64, keep_params=True, progress=False)
    a = train(model, data, canary, dp, batching="per-run", **kw)
    b = train(model, data, canary, dp, batching="gather", **kw)
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-10, atol=1e-12)
    for pa, pb in zip(a.params, b.params):
        np.testing.assert_allclose(pa, pb, rtol=1e-10, atol=1e-12)


@needs_kernels
def test_float32_per_run_training_is_close_to_the_torch_path():
    """float32 (the kernels' own tanh and exp): within float tolerance of the torch path."""
    model, x, y, _, _ = _mlp_case((24, 16, 5), True, n=60, dtype=torch.float32)
    data = Records(x, y)
    canary = InputCanary(x[:2].clone(), torch.tensor([1, 4]))
    dp = DPConfig(steps=20, sampling_rate=0.3, noise_multiplier=0.9, clip=0.8, lr=0.01, optimizer="adam")
    kw = dict(seed=4, runs=np.arange(16), bits=np.arange(16) % 2, score_every=10, init="random",
              keep_params=True, progress=False)
    a = train(model, data, canary, dp, batching="per-run", **kw)
    b = train(model, data, canary, dp, batching="gather", **kw)
    for pa, pb in zip(a.params, b.params):
        np.testing.assert_allclose(pa, pb, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-4, atol=1e-5)


@needs_kernels
def test_every_build_gives_the_same_bits(monkeypatch):
    """Each build this CPU can run (SSE2, AVX2, AVX-512 on x86-64) draws and trains the
    same numbers."""
    flags = kernels._cpu_flags()
    builds = [v for v, need in kernels.VARIANTS if set(need) <= flags
              and importlib.util.find_spec(f"subaudit.engine._kernels_{v}") is not None]
    if len(builds) < 2:
        pytest.skip("one build of the kernels runs on this CPU")
    model, x, y, params, weight = _mlp_case((64, 32, 5), True, dtype=torch.float32, R=3)
    x_sq = (x * x).sum(-1) + 1
    results = []
    load = kernels.library                  # each build itself (the patch below replaces it)
    for v in builds:
        lib = load(v)
        monkeypatch.setattr(kernels, "library", lambda variant=None, lib=lib: lib)
        out = torch.empty(2, 999)
        kernels.CompiledStreamBlock([[1], [2]]).normal(0, out)
        grads = [torch.empty_like(p) for p in params]
        kernels.clipped_sum(params, kernels.RecordTable(x, y, x_sq), weight, 1.0, grads, 0.5)
        results.append([out, *grads])
    assert len(results) == len(builds)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a, b)


def test_a_build_is_chosen_by_name_or_refused(monkeypatch):
    monkeypatch.setenv("SUBAUDIT_KERNELS", "sse2")
    if kernels.cpu_variant() == "":
        pytest.skip("one build of the kernels on this machine")
    assert kernels.cpu_variant() == "sse2"
    monkeypatch.setenv("SUBAUDIT_KERNELS", "avx1024")
    with pytest.raises(ParameterError, match="SUBAUDIT_KERNELS"):
        kernels.cpu_variant()
