"""Canary crafting, and the S2 audit it enables on the engine."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from subaudit.accounting import calibrate_sigma, epsilon
from subaudit.scenarios.s2 import gradient_canary, least_updated_coordinate
from subaudit.engine import MLP, DPConfig, Records, train
from subaudit.estimation import estimate_epsilon


def test_least_updated_coordinate_is_the_one_data_never_moves():
    """A feature that is 0 in every record leaves its weights untouched."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 6, generator=g)
    x[:, 4] = 0.0
    data = Records(x, torch.randint(0, 3, (50,), generator=g))
    model = MLP((6, 3))
    dp = DPConfig(steps=5, sampling_rate=0.5, noise_multiplier=3.0, clip=1.0, lr=0.1)
    j, moved = least_updated_coordinate(model, data, dp)
    assert j in (4, 10, 16) and moved == 0.0  # weight[k, 4], k = 0, 1, 2 (flat, row-major)
    canary = gradient_canary(model, data, dp)
    assert canary.g[0, j] == 1.0 and canary.g[1, j] == -1.0
    assert canary.g.abs().sum() == 2.0


@pytest.mark.slow
def test_s2_audit_beats_add_remove_epsilon():
    """Issue 3 acceptance: S2 at q = 1 on random features, sigma for eps_S = 4.

    n = 500, d = 768, R = 1,000 (500 per world), T = 100: the paper estimator's
    empirical epsilon exceeds the add/remove epsilon of the same sigma, i.e. the
    audit shows leakage that add/remove accounting says cannot happen.
    """
    g = torch.Generator().manual_seed(11)
    n, d, k, steps, delta = 500, 768, 10, 100, 1e-5
    data = Records(torch.randn(n, d, generator=g) / d**0.5 * 4,
                   torch.randint(0, k, (n,), generator=g))
    sigma = calibrate_sigma(4.0, 1.0, steps, delta, "substitute")
    eps_ar = epsilon(sigma, 1.0, steps, delta, "add-remove").epsilon
    model = MLP((d, k))
    dp = DPConfig(steps=steps, sampling_rate=1.0, noise_multiplier=sigma, clip=1.0, lr=0.5)
    canary = gradient_canary(model, data, dp)
    runs = np.arange(1000)
    res = train(model, data, canary, dp, seed=2026, runs=runs, bits=runs % 2,
                score_every=steps, progress=False)
    est = estimate_epsilon(res.scores[-1], res.bits, delta=delta, alpha=0.05, estimator="paper")
    assert est.epsilon > eps_ar, (est.epsilon, eps_ar)
    assert est.epsilon < 4.0 * 1.2            # and no wild over-estimate of eps_S


# ---------------------------------------------------------------- S3-S5 and the reference model

from subaudit.scenarios.crafting import per_example_grads, reference_model  # noqa: E402
from subaudit.scenarios.s2 import craft_gradient, least_updated_coordinates  # noqa: E402
from subaudit.scenarios.s3 import craft_input  # noqa: E402
from subaudit.scenarios.s4 import craft_mislabeled  # noqa: E402
from subaudit.scenarios.s5 import craft_natural  # noqa: E402
from subaudit.engine import LogitDifference, LogOddsDifference, RunStreams, init_params  # noqa: E402
from subaudit.validation import ParameterError  # noqa: E402


def _small(seed=0, n=40, d=6, k=4, hidden=()):
    g = torch.Generator().manual_seed(seed)
    data = Records(torch.randn(n, d, generator=g), torch.randint(0, k, (n,), generator=g))
    model = MLP((d, *hidden, k))
    params = [p[0] for p in init_params(model, [RunStreams(seed, 0)], "random")]
    return model, data, params


def _loop_grads(model, params, x, y):
    """Per-example gradients the slow way: one autograd call per record."""
    module = model.torch_module()
    with torch.no_grad():
        for p, v in zip(module.parameters(), params):
            p.copy_(v)
    out = []
    for xi, yi in zip(x, y):
        loss = torch.nn.functional.cross_entropy(module(xi[None]), yi[None])
        gs = torch.autograd.grad(loss, list(module.parameters()))
        out.append(torch.cat([g.reshape(-1) for g in gs]))
    return torch.stack(out)


@pytest.mark.parametrize("hidden", [(), (5,)])
def test_per_example_grads_match_autograd_loop(hidden):
    model, data, params = _small(hidden=hidden)
    fast = per_example_grads(model, params, data.x[:7], data.y[:7])
    torch.testing.assert_close(fast, _loop_grads(model, params, data.x[:7], data.y[:7]))


def _torch_func_grads(model, params, x, y):
    """Per-example gradients as torch.func computes them: vmap of grad of the model's
    torch.nn.Sequential (what per_example_grads replaced, bit for bit)."""
    from torch.func import functional_call, grad, vmap

    module = model.torch_module().to(params[0].dtype)
    names = [name for name, _ in module.named_parameters()]

    def loss(p, xi, yi):
        return torch.nn.functional.cross_entropy(functional_call(module, p, (xi[None],)), yi[None])

    g = vmap(grad(loss), in_dims=(None, 0, 0))(dict(zip(names, params)), x.to(params[0].dtype), y.long())
    return torch.cat([g[k].reshape(x.shape[0], -1) for k in names], dim=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sizes", [(1280, 10), (384, 2), (256, 128, 26), (16, 8, 26), (600, 128, 100)])
def test_per_example_grads_are_torch_funcs_bits(sizes, dtype):
    """The default run's heads and MLPs (and the paper's Purchase100 MLP), one record to 1,024,
    with zero features (so -0.0 gradients occur): the same bits as torch.func, so that the
    canaries crafted from them, their cosines and norms do not change."""
    g = torch.Generator().manual_seed(sum(sizes))
    model = MLP(sizes)
    params = [(torch.randn(*shape, generator=g) * 0.1).to(dtype)
              for i, o in zip(sizes[:-1], sizes[1:]) for shape in ((o, i), (o,))]
    for n in (1, 7, 1024):
        x = torch.randn(n, sizes[0], generator=g)
        x[:, ::5] = 0.0
        y = torch.randint(0, sizes[-1], (n,), generator=g)
        ours, ref = per_example_grads(model, params, x, y), _torch_func_grads(model, params, x, y)
        bits = torch.int32 if dtype == torch.float32 else torch.int64
        assert torch.equal(ours.view(bits), ref.view(bits)), (sizes, dtype, n)


def _cos(a, b):
    return float(a @ b / (a.norm() * b.norm()))


def test_mislabeled_and_natural_pick_the_least_cosine():
    model, data, params = _small(hidden=(5,))
    x, y = data.x[0], int(data.y[0])
    g = _loop_grads(model, params, x[None], torch.tensor([y]))[0]
    s4 = craft_mislabeled(model, params, x, y)
    by_label = {c: _cos(g, _loop_grads(model, params, x[None], torch.tensor([c]))[0])
                for c in range(4) if c != y}
    assert int(s4.canary.y[1]) == min(by_label, key=by_label.get)
    assert s4.info["cosine"] == pytest.approx(min(by_label.values()), abs=1e-6)
    aux = Records(data.x[10:], data.y[10:])
    s5 = craft_natural(model, params, x, y, aux)
    ga = _loop_grads(model, params, aux.x, aux.y)
    cos = [_cos(g, gi) for gi in ga]
    assert s5.info["aux_index"] == int(np.argmin(cos))
    assert torch.equal(s5.canary.x[1], aux.x[s5.info["aux_index"]])


def test_crafted_input_turns_the_gradient_around():
    model, data, params = _small(seed=3, d=8, k=3)
    x, y = data.x[0], int(data.y[0])
    s3 = craft_input(model, params, x, y, steps=300, lr=0.5)
    assert int(s3.canary.y[1]) == y                      # the label is kept
    assert s3.info["objective_last"] < s3.info["objective_first"]
    assert s3.info["cosine"] < 0
    assert s3.info["norm_z_prime"] == pytest.approx(s3.info["norm_z"], rel=0.25)


@pytest.mark.parametrize("hidden", [(), (5,)])
def test_crafted_input_is_torch_optim_sgds_descent(hidden):
    """S3 steps x' itself; torch.optim.SGD on the same objective gives the same bits."""
    model, data, params = _small(seed=4, d=8, k=3, hidden=hidden)
    x, y = data.x[0], int(data.y[0])
    s3 = craft_input(model, params, x, y, steps=25, lr=0.5)
    target = per_example_grads(model, params, x[None], torch.tensor([y]))[0]
    module = model.torch_module()
    with torch.no_grad():
        for p, v in zip(module.parameters(), params):
            p.copy_(v)
    xp = torch.zeros_like(x, requires_grad=True)
    opt = torch.optim.SGD([xp], lr=0.5)
    for _ in range(25):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(module(xp[None]), torch.tensor([y]))
        g = torch.cat([t.reshape(-1) for t in
                       torch.autograd.grad(loss, list(module.parameters()), create_graph=True)])
        last = torch.nn.functional.cosine_similarity(g, target, dim=0) + (g.norm() - target.norm()) ** 2
        last.backward()
        opt.step()
    assert torch.equal(s3.canary.x[1].view(torch.int32), xp.detach().view(torch.int32))
    assert s3.info["objective_last"] == float(last.detach())


def test_reference_model_equals_plain_full_batch_training():
    """The reference model is plain (non-DP) full-batch gradient descent on D."""
    model, data, _ = _small(seed=4, hidden=(5,))
    params, conf = reference_model(model, data, steps=15, lr=0.3, optimizer="sgd",
                                   init="random", seed=4, every=15)
    module = model.torch_module()
    with torch.no_grad():
        for p, v in zip(module.parameters(), init_params(model, [RunStreams(4, 0)], "random")):
            p.copy_(v[0])
    opt = torch.optim.SGD(module.parameters(), lr=0.3)
    for _ in range(15):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(module(data.x), data.y).backward()
        opt.step()
    for mine, theirs in zip(params, module.parameters()):
        torch.testing.assert_close(mine, theirs.detach(), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        prob = torch.softmax(module(data.x), -1).gather(1, data.y[:, None])[:, 0]
    np.testing.assert_allclose(conf, prob.numpy(), rtol=1e-5, atol=1e-6)


def test_gradient_rms_coordinate_is_the_papers_code_statistic():
    """gradient-rms: the root of the summed squared privatised (noiseless) gradients; with SGD
    the gradient is minus the update over lr, so it is checked against the parameter path."""
    model, data, _ = _small(seed=5, d=6, k=3)
    dp = DPConfig(steps=6, sampling_rate=1.0, noise_multiplier=0.0, clip=0.5, lr=0.2)
    index, value = least_updated_coordinates(model, data, dp, 3, statistic="gradient-rms")
    path = []
    train(model, data, None, dp, seed=0, runs=[0], bits=[0], score_every=6, init="zero",
          observe=lambda t, p, g: path.append(torch.cat([x[0].reshape(-1) for x in p]).double()),
          progress=False)
    steps = torch.diff(torch.stack([torch.zeros_like(path[0]), *path]), dim=0) / -0.2
    rms = steps.pow(2).sum(0).sqrt()
    np.testing.assert_allclose(value, rms[index].numpy(), rtol=1e-5, atol=1e-9)
    assert list(index) == list(torch.argsort(rms, stable=True)[:3].numpy())
    s2 = craft_gradient(model, data, dp, coordinate="gradient-rms")
    assert s2.info["coordinate"] == index[0] and s2.info["statistic"] == "gradient-rms"
    with pytest.raises(ParameterError, match="s2_coordinate"):
        least_updated_coordinates(model, data, dp, 1, statistic="smallest")


def test_natural_canary_pool_and_input_scores():
    model, data, params = _small(seed=2, d=6, k=3)
    x, y = data.x[0], int(data.y[0])
    aux = Records(data.x[10:], data.y[10:])
    full = craft_natural(model, params, x, y, aux)
    ga = _loop_grads(model, params, aux.x, aux.y)
    g = _loop_grads(model, params, x[None], torch.tensor([y]))[0]
    cos = [_cos(g, gi) for gi in ga]
    small = craft_natural(model, params, x, y, aux, pool=4, score="log-odds")
    assert small.info["aux_index"] == int(np.argmin(cos[:4])) and small.info["pool"] == 4
    assert full.info["pool"] == aux.x.shape[0] and full.info["aux_index"] == int(np.argmin(cos))
    assert isinstance(small.canary.score, LogOddsDifference)
    assert isinstance(full.canary.score, LogitDifference)
    with pytest.raises(ParameterError, match="s5_pool"):
        craft_natural(model, params, x, y, aux, pool=aux.x.shape[0] + 1)
    with pytest.raises(ParameterError, match="input_score"):
        craft_input(model, params, x, y, steps=2, score="probability")


def test_reference_model_per_q_is_poisson_minibatch_training():
    """The paper's code's reference: minibatch training; at q < 1 it differs from full batch
    and is a function of its seed."""
    model, data, _ = _small(seed=4, d=6, k=3)
    kw = dict(steps=10, lr=0.3, optimizer="sgd", seed=4, every=5)
    full, _ = reference_model(model, data, **kw)
    mini, conf = reference_model(model, data, sampling_rate=0.25, **kw)
    again, conf2 = reference_model(model, data, sampling_rate=0.25, **kw)
    assert not torch.allclose(full[0], mini[0])
    assert torch.equal(mini[0], again[0]) and np.array_equal(conf, conf2)


# --------------------------------------------------------------------------- S7


def _one_hot_records(n: int, attributes: int, levels: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, levels, (n, attributes), generator=g)
    return torch.nn.functional.one_hot(codes, levels).reshape(n, -1).float()


def test_linear_backdoor_gradients_are_opposite_on_the_unused_feature():
    from subaudit.scenarios.crafting import per_example_grads
    from subaudit.scenarios.s7 import backdoor_linear

    g = torch.Generator().manual_seed(1)
    x = torch.randn(40, 5, generator=g)
    x[:, 3] = 0.0                                   # the feature no record uses
    data = Records(x, torch.randint(0, 4, (40,), generator=g))
    model = MLP((5, 4))
    canary, info = backdoor_linear(model, data, y=2)
    assert info["feature"] == 3 and info["feature_mass"] == 0.0
    assert torch.equal(canary.x[0], -canary.x[1]) and canary.x[0, 3] == 100.0
    zero = [torch.zeros(s, dtype=torch.float64) for s in model.shapes]
    gz, gzp = per_example_grads(model, zero, canary.x.double(), canary.y)
    u = canary.score.direction
    cos = torch.nn.functional.cosine_similarity
    # z's update (-g) lies along +u and z''s along -u, up to the bias part (1 / M)
    assert float(cos(-gz, u, dim=0)) > 0.9999 and float(cos(-gzp, -u, dim=0)) > 0.9999
    assert float(cos(gz, gzp, dim=0)) < -0.9998
    # the data's own gradients never touch column 3
    grads = per_example_grads(model, zero, data.x.double(), data.y)
    assert float((grads @ u).abs().max()) < 1e-12


def test_trap_units_fire_only_at_the_target_and_cost_nothing_elsewhere():
    from subaudit.scenarios.crafting import per_example_grads
    from subaudit.scenarios.s7 import backdoor_trap
    from subaudit.engine import RunStreams, init_params

    data_x = _one_hot_records(60, 5, 4, seed=2)
    x = data_x[0].clone()
    data = Records(data_x[1:], torch.randint(0, 3, (59,), generator=torch.Generator().manual_seed(3)))
    data = Records(data.x[(data.x != x).any(1)], data.y[(data.x != x).any(1)])   # x is unique
    model = MLP((20, 6, 3))
    canary, info = backdoor_trap(model, data, x, y=1, y_prime=2)
    assert info["trap_units"] == [4, 5] and info["duplicates"] == 0 and info["max_leak"] < 1e-7
    params = init_params(model, [RunStreams(0, r) for r in range(3)], "random", torch.float64)
    plain = [p.clone() for p in params]
    canary.initialise(params)
    cos = torch.nn.functional.cosine_similarity
    u = canary.score.direction
    for r in range(3):
        run = [p[r] for p in params]
        w1, b1, w2 = run[0], run[1], run[2]
        pre = torch.cat([x[None], data.x]).double() @ w1.T + b1
        assert torch.allclose(pre[0, 4:], torch.zeros(2, dtype=torch.float64))  # 0 at x
        assert float(pre[1:, 4:].max()) <= -2 * info["margin"]                   # saturated elsewhere
        # the two trap units cancel for every other record: same logits as without their columns
        h = torch.tanh(data.x.double() @ w1.T + b1)
        with_trap = h @ w2.T
        without = h[:, :4] @ w2[:, :4].T
        assert torch.allclose(with_trap, without, atol=1e-6)
        gz, gzp = per_example_grads(model, run, canary.x.double(), canary.y)
        # the stated alignment: z's update along +u, z''s along -u, opposite to each other
        assert float(cos(-gz, u, dim=0)) > 0.99 and float(cos(-gzp, -u, dim=0)) > 0.99
        # no head gradient on the trap columns at x (activation 0 there)
        head = gz[20 * 6 + 6:20 * 6 + 6 + 18].view(3, 6)
        assert float(head[:, 4:].abs().max()) < 1e-12
        # and the rest of the initialisation is the plain one
        mask = torch.ones(model.num_params, dtype=torch.bool)
        for layer, index, _ in canary.trap:
            offset = sum(int(torch.tensor(s).prod()) for s in model.shapes[:layer])
            mask[offset + index] = False
        flat = torch.cat([p[r].reshape(-1) for p in params])
        flat0 = torch.cat([p[r].reshape(-1) for p in plain])
        assert torch.equal(flat[mask], flat0[mask])
    with pytest.raises(Exception, match="0/1"):
        backdoor_trap(model, Records(data.x * 0.5, data.y), x, 1, 2)


def test_engine_trains_from_the_trap_and_scores_along_it():
    from subaudit.scenarios.s7 import backdoor_trap

    data_x = _one_hot_records(80, 5, 4, seed=4)
    x = data_x[0]
    keep = (data_x[1:] != x).any(1)
    data = Records(data_x[1:][keep], torch.randint(0, 3, (int(keep.sum()),),
                                                   generator=torch.Generator().manual_seed(5)))
    model = MLP((20, 6, 3))
    canary, _ = backdoor_trap(model, data, x, y=1, y_prime=2)
    dp = DPConfig(steps=30, sampling_rate=0.5, noise_multiplier=0.5, clip=1.0, lr=0.01, optimizer="adam")
    runs = np.arange(64)
    bits = (1 - runs % 2).astype(np.int8)
    res = train(model, data, canary, dp, seed=9, runs=runs, bits=bits, score_every=10, init="random",
                keep_params=True, progress=False)
    # every run started from the trap: its first-layer rows of the trap units began at s (2x - 1)
    w_trap = canary.trap[0][2][:20].numpy()
    assert np.abs(res.params[0][:, 4, :] - w_trap).max() < 1.0   # moved by lr-sized Adam steps only

    def gap(scores: np.ndarray) -> tuple[float, float]:
        a, b = scores[bits == 1], scores[bits == 0]
        return a.mean() - b.mean(), float(np.hypot(a.std() / len(a) ** 0.5, b.std() / len(b) ** 0.5))

    # z pushes (w, b) of the trap along +u, z' along -u: the worlds separate beyond error
    g, se = gap(res.scores[-1])
    assert g > 5 * se
    # the same canary records without the trap (plain init) separate far less along u
    res0 = train(model, data, replace(canary, trap=()), dp, seed=9, runs=runs, bits=bits,
                 score_every=10, init="random", progress=False)
    assert g > 3 * abs(gap(res0.scores[-1])[0])


def test_backdoor_crafting_reports_alignment_and_accuracy_cost():
    from subaudit.scenarios.crafting import reference_model
    from subaudit.scenarios.s7 import craft_backdoor

    data_x = _one_hot_records(60, 5, 4, seed=6)
    y = torch.randint(0, 3, (60,), generator=torch.Generator().manual_seed(7))
    feats = {"train": Records(data_x, y), "test": Records(data_x[:20], y[:20]), "classes": 3}
    model = MLP((20, 6, 3))
    ref, _ = reference_model(model, feats["train"], steps=10, lr=0.01, optimizer="adam", init="random")
    dp = DPConfig(steps=12, sampling_rate=0.5, noise_multiplier=0.0, clip=1.0, lr=0.01, optimizer="adam")
    crafted = craft_backdoor(model, feats, 0, ref, dp, init="random", seed=1)
    info = crafted.info
    assert crafted.scenario == "S7" and len(info["alignment_per_step"]) == 13
    assert info["alignment_start"] > 0.99 and 0 < info["alignment_min"] <= info["alignment_mean"] <= 1
    assert info["trap_sampling_rate"] == 0.5 and info["label"] == int(y[0]) != info["label_prime"]
    assert info["accuracy_cost"] == pytest.approx(info["accuracy_without"] - info["accuracy_with"])
    # the realised sampling is the canary's own Poisson draws (record n of each probe run's
    # mask stream, drawn here independently of the engine)
    n = 59
    drawn = np.zeros((12, 4))
    for r in range(4):
        streams = RunStreams(1, r)
        for t in range(12):
            drawn[t, r] = float(streams.draw_uniform(torch.empty(n + 1))[n] < 0.5)
    assert info["trap_sampled_per_step"] == pytest.approx(drawn.mean(1).tolist())
    assert info["trap_sampled_share"] == pytest.approx(drawn.mean()) and 0 < drawn.mean() < 1
