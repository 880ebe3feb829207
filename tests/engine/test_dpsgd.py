"""Each DP-SGD operation is defined once (subaudit.engine.dpsgd): its differentiable form
gives the same bits as its in-place form, the updates are torch.optim's, and the values a
DPConfig derives are the ones its users computed by hand."""

from __future__ import annotations

import pytest
import torch

from subaudit.engine import MLP, DPConfig
from subaudit.engine import dpsgd


def _case(sizes, shared: bool, dtype, R: int = 5, n: int = 23, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    model = MLP(sizes)
    params = [torch.randn(R, *sh, generator=g, dtype=dtype) * 0.5 for sh in model.shapes]
    shape = (n, sizes[0]) if shared else (R, n, sizes[0])
    x = torch.randn(*shape, generator=g, dtype=dtype)
    y = torch.randint(0, sizes[-1], shape[:-1], generator=g)
    weight = (torch.rand(R, n, generator=g) < 0.5).to(dtype)
    return params, dpsgd.Batch(x, y, (x * x).sum(-1) + 1, weight, shared)


@pytest.mark.parametrize("sizes", [(7, 3), (7, 5, 3), (7, 6, 5, 3)])
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_clipped_sum_differentiable_is_the_in_place_one_bit_for_bit(sizes, shared, dtype):
    params, batch = _case(sizes, shared, dtype)
    out = [torch.empty_like(p) for p in params]
    dpsgd.clipped_sum(params, batch, 0.7, 0.125, out=out)
    leaves = [p.clone().requires_grad_(True) for p in params]
    pure = dpsgd.clipped_sum(leaves, batch, 0.7, 0.125)
    assert all(torch.equal(a, b.detach()) for a, b in zip(out, pure))
    sum(t.sum() for t in pure).backward()                       # and it is differentiable
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in leaves)


def test_clipped_sum_is_the_sum_of_clipped_per_example_gradients():
    """Against autograd one record at a time: Opacus' clip factor min(1, C / (||g|| + 1e-6))."""
    params, batch = _case((4, 3, 2), True, torch.float64, R=2, n=6)
    got = dpsgd.clipped_sum(params, batch, 0.3, 0.5)
    model = MLP((4, 3, 2))
    for r in range(2):
        want = [torch.zeros_like(p[r]) for p in params]
        for i in range(6):
            module = model.torch_module().double()
            with torch.no_grad():
                for p, v in zip(module.parameters(), params):
                    p.copy_(v[r])
            loss = torch.nn.functional.cross_entropy(module(batch.x[i:i + 1]), batch.y[i:i + 1])
            grads = torch.autograd.grad(loss, list(module.parameters()))
            norm = torch.sqrt(sum((g * g).sum() for g in grads))
            factor = min(1.0, 0.3 / (float(norm) + 1e-6)) * float(batch.weight[r, i]) * 0.5
            want = [w + factor * g for w, g in zip(want, grads)]
        for a, b in zip(got, want):
            torch.testing.assert_close(a[r], b, rtol=1e-12, atol=1e-14)


def test_add_noise_and_sgd_forms_agree():
    params, _ = _case((4, 3), True, torch.float32)
    g = torch.Generator().manual_seed(1)
    grads = [torch.randn(p.shape, generator=g) for p in params]
    noise = torch.randn(params[0].shape[0], sum(p[0].numel() for p in params), generator=g)
    pure = dpsgd.add_noise(grads, noise, 0.3, inplace=False)
    dpsgd.add_noise(grads, noise, 0.3)
    assert all(torch.equal(a, b) for a, b in zip(grads, pure))


def test_the_values_a_dpconfig_derives():
    dp = DPConfig(steps=3, sampling_rate=0.25, noise_multiplier=1.5, clip=2.0, lr=0.1)
    assert dp.canary_rate == 0.25 and dp.noise_std == 3.0
    assert dp.expected_batch(401) == 0.25 * 401 and dp.gradient_scale(401) == 1.0 / (0.25 * 401)
    assert dp.record_rates(400, 1) == 0.25 and not dp.samples_all
    own = DPConfig(steps=3, sampling_rate=0.25, noise_multiplier=1.5, clip=2.0, lr=0.1,
                   canary_sampling_rate=0.5, expected_batch_size=64.0)
    assert own.canary_rate == 0.5 and own.expected_batch(401) == 64.0 and own.gradient_scale(401) == 1 / 64
    rates = own.record_rates(4, 2)
    assert rates.tolist() == [0.25] * 4 + [0.5] * 2
    assert DPConfig(steps=1, sampling_rate=1.0, noise_multiplier=0, clip=1, lr=1).samples_all
    assert not DPConfig(steps=1, sampling_rate=1.0, noise_multiplier=0, clip=1, lr=1,
                        canary_sampling_rate=0.5).samples_all


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_optimizer_updates_are_torch_optims(optimizer, dtype):
    """The engine's SGD and Adam updates (:mod:`subaudit.engine.dpsgd`) are ``torch.optim.SGD``
    (bit for bit) and ``torch.optim.Adam`` (to rounding) over steps with changing gradients,
    and their differentiable form gives the same bits as the in-place one."""
    g = torch.Generator().manual_seed(3)
    start = [torch.randn(4, 7, 5, generator=g, dtype=dtype), torch.randn(4, 5, generator=g, dtype=dtype)]
    dp = DPConfig(steps=1, sampling_rate=1.0, noise_multiplier=1.0, clip=1.0, lr=0.05,
                  optimizer=optimizer)
    ours = [p.clone() for p in start]
    pure = [p.clone() for p in start]
    theirs = [p.clone() for p in start]
    moments = ([torch.zeros_like(p) for p in start], [torch.zeros_like(p) for p in start])
    pure_moments = ([torch.zeros_like(p) for p in start], [torch.zeros_like(p) for p in start])
    opt = (torch.optim.SGD(theirs, lr=dp.lr) if optimizer == "sgd" else
           torch.optim.Adam(theirs, lr=dp.lr, betas=dp.betas, eps=dp.eps, foreach=False))
    for t in range(1, 6):
        grads = [torch.randn(p.shape, generator=g, dtype=dtype) for p in start]
        if optimizer == "sgd":
            dpsgd.sgd_update(ours, grads, dp.lr)
            pure = dpsgd.sgd_update(pure, grads, dp.lr, inplace=False)
        else:
            dpsgd.adam_update(ours, grads, moments, t, dp.lr, dp.betas, dp.eps)
            pure, pure_moments = dpsgd.adam_update(pure, grads, pure_moments, t, dp.lr, dp.betas, dp.eps,
                                                   inplace=False)
        for p, gr in zip(theirs, grads):
            p.grad = gr.clone()
        opt.step()
        assert all(torch.equal(a, b) for a, b in zip(ours, pure))
        if optimizer == "sgd":
            assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
        else:
            tol = 1e-6 if dtype == torch.float32 else 1e-13
            for a, b in zip(ours, theirs):
                torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    assert not torch.equal(ours[0], start[0])
