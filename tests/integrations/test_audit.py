"""One-run audits of Opacus training (subaudit.integrations.audit): the games, gradient
canaries against their closed-form sign accuracy, and the errors of bad use."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from opacus import PrivacyEngine
from scipy import stats
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from subaudit.estimation.procedures import perfect_epsilon
from subaudit.integrations.audit import AuditError, OneRunAudit, draw_bits
from subaudit.validation import ParameterError

pytestmark = [pytest.mark.filterwarnings("ignore:Full backward hook"),
              pytest.mark.filterwarnings("ignore:Secure RNG")]


def _pairs(m: int, d: int = 4) -> list:
    x = torch.arange(2 * m * d, dtype=torch.float32).reshape(2 * m, d)
    return [((x[2 * i], torch.tensor(0)), (x[2 * i + 1], torch.tensor(1))) for i in range(m)]


def test_bits_are_fair_coins_from_the_audit_seed_alone():
    m = 20_000
    bits = OneRunAudit(_pairs(m, 1), game="membership", seed=3).bits
    # inclusion rate 1/2: a two-sided binomial test at 1e-4 (fails by chance once in 10,000 seeds)
    assert stats.binomtest(int(bits.sum()), m, 0.5).pvalue > 1e-4
    # neighbours are independent: pairs of consecutive bits are uniform over the 4 patterns
    pattern = np.bincount(2 * bits[:-1:2] + bits[1::2], minlength=4)
    assert stats.chisquare(pattern).pvalue > 1e-4
    # the training's seeds do not enter: global torch and numpy states leave the bits alone
    torch.manual_seed(99)
    np.random.seed(99)
    again = OneRunAudit(_pairs(m, 1), game="membership", seed=3).bits
    assert np.array_equal(bits, again) and np.array_equal(bits, draw_bits(3, m))
    assert not np.array_equal(bits, OneRunAudit(_pairs(m, 1), game="membership", seed=4).bits)


@pytest.mark.parametrize("game", ["membership", "substitute"])
def test_games_insert_the_right_records(game):
    m, n = 400, 50
    pairs = _pairs(m)
    audit = OneRunAudit(pairs, game=game, seed=11)
    base = TensorDataset(torch.full((n, 4), -1.0), torch.zeros(n, dtype=torch.long))
    data = audit.dataset(base)
    inserted = {tuple(data[i][0].tolist()) for i in range(n, len(data))}
    for (z, twin), b in zip(pairs, audit.bits):
        has_z, has_twin = tuple(z[0].tolist()) in inserted, tuple(twin[0].tolist()) in inserted
        if game == "membership":  # z_i with probability 1/2, its twin never
            assert (has_z, has_twin) == (bool(b), False)
        else:  # exactly one member of every pair
            assert (has_z, has_twin) == (bool(b), not b)
    assert len(data) == n + (int(audit.bits.sum()) if game == "membership" else m)
    assert all(torch.equal(data[i][0], base[i][0]) for i in range(n))


def _linear_training(audit: OneRunAudit, *, n: int, zero: int, steps: int, batch: int, sigma: float, lr: float,
                     poisson: bool = True, plain: bool = False):
    """A linear classifier on n records whose last ``zero`` input features are always 0: the
    weights of those features get no gradient from any record. Built by
    ``audit.make_private``, or by Opacus' own ``make_private`` (``plain``, or ``poisson=False``)."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(n, 4, generator=g), torch.zeros(n, zero)], dim=1)
    y = (x[:, 0] > 0).long()
    model = nn.Linear(4 + zero, 2)
    audit.start(model)
    engine = PrivacyEngine(accountant="prv")
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    if plain or not poisson:
        loader = DataLoader(audit.dataset(TensorDataset(x, y)), batch_size=batch)
        model, opt, loader = engine.make_private(
            module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=sigma, max_grad_norm=1.0,
            poisson_sampling=poisson, noise_generator=torch.Generator().manual_seed(1))
    else:
        model, opt, loader = audit.make_private(
            engine, module=model, optimizer=optimizer, base=TensorDataset(x, y), batch_size=batch,
            noise_multiplier=sigma, max_grad_norm=1.0, noise_generator=torch.Generator().manual_seed(1))
    return model, opt, loader, engine


def _one_step(model, opt, loader) -> None:
    for xb, yb in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
        break


@pytest.mark.parametrize("game", ["membership", "substitute"])
def test_sampling_ignores_the_bits(game):
    """Across draws of the bits the training samples at batch / len(base), normalises by the
    batch and accounts at that rate, in both games; Opacus' own make_private takes both from
    the dataset's size, which in the membership game the bits change (refused by finish)."""
    n, batch = 300, 64
    seen, plain = set(), set()
    for seed in range(6):
        audit = OneRunAudit(_pairs(64, 12), game=game, seed=seed)
        model, opt, loader, engine = _linear_training(audit, n=n, zero=8, steps=1, batch=batch, sigma=1.0, lr=0.1)
        _one_step(model, opt, loader)
        seen.add((loader.sample_rate, opt.expected_batch_size, engine.accountant.history[0][1]))
        audit.finish(model, data_loader=loader, privacy_engine=engine)
        other = OneRunAudit(_pairs(64, 12), game=game, seed=seed)
        model, opt, loader, engine = _linear_training(other, n=n, zero=8, steps=1, batch=batch, sigma=1.0, lr=0.1,
                                                      plain=True)
        plain.add((loader.sample_rate, opt.expected_batch_size))
        _one_step(model, opt, loader)
        if game == "membership":
            with pytest.raises(AuditError, match="depends on the secret bits"):
                other.finish(model, data_loader=loader, privacy_engine=engine)
        else:
            other.finish(model, data_loader=loader, privacy_engine=engine)
    assert seen == {(batch / n, batch, batch / n)}
    assert (len(plain) == 1) == (game == "substitute")  # int(N q) with N = n + inserted: the bits show


def _train(model, opt, loader, steps: int) -> None:
    """``steps`` Poisson batches of the loader, one optimiser step each."""
    step = 0
    while step < steps:
        for xb, yb in loader:
            if step == steps:
                break
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            step += 1


def _untouched(zero: int) -> np.ndarray:
    """Flat indices of nn.Linear(4 + zero, 2)'s weights on the always-zero features."""
    cols = np.arange(4, 4 + zero)
    return np.sort(np.concatenate([cols, (4 + zero) + cols]))


def test_gradient_canaries_match_the_binomial_sign_accuracy():
    """Score of canary i = s_i C K_i + N(0, T sigma^2 C^2) up to a positive factor, with
    K_i ~ Binomial(T, q) its draws and s_i = +-1, on coordinates no record touches, so
    P(sign right) = sum_k Binom(k; T, q) Phi(k / (sigma sqrt(T))) (k = 0: 1/2)."""
    zero, steps, sigma, n, batch = 1000, 40, 1.5, 400, 80
    m = 2 * zero
    audit = OneRunAudit(game="substitute", seed=5, gradient_canaries=m)
    model, opt, loader, engine = _linear_training(audit, n=n, zero=zero, steps=steps, batch=batch, sigma=sigma, lr=0.5)
    canaries = audit.attach(opt, loader, coordinates=_untouched(zero))
    q = canaries.sample_rate
    assert q == batch / n
    _train(model, opt, loader, steps)
    assert canaries.draws == steps
    scores = audit.gradient_scores(opt)
    assert np.array_equal(scores[:, 1], -scores[:, 0])
    right = np.mean((scores[:, 0] > 0) == (audit.gradient_bits == 1))
    k = np.arange(steps + 1)
    predicted = float(np.sum(stats.binom.pmf(k, steps, q) * stats.norm.cdf(k / (sigma * np.sqrt(steps)))))
    se = np.sqrt(predicted * (1 - predicted) / m)
    assert abs(right - predicted) < 4 * se, (right, predicted)
    # and the report: bounds, the accountant's epsilon of this training, the ceiling
    report = audit.finish(model, data_loader=loader, privacy_engine=engine, optimizer=opt)
    assert report.history == ((sigma, pytest.approx(q), steps),)
    assert report.reference == report.accountant["substitute"] > report.accountant["add-remove"]
    for row in report.rows:
        assert row["canaries"] == "gradient" and 0 < row["epsilon"] <= row["ceiling"] <= report.reference


def test_kary_gradient_slots_match_the_binomial_code_accuracy():
    """k-ary slots of width w = 2 (k = 4): slot i adds s_i C / sqrt(w) on its w untouched
    coordinates when its one draw K_i ~ Binomial(T, q) says so, so its guess (the value whose sign
    vector the update projects on most: the signs of its coordinates) is right with probability
    sum_k Binom(k; T, q) Phi(k / (sqrt(w) sigma sqrt(T)))^w; the scores are the projections; the
    report's rows are the f-DP procedure's k-ary bound under its own cap."""
    from subaudit.integrations.audit import hypercube_codes

    zero, steps, sigma, n, batch, w = 1000, 40, 1.5, 400, 80, 2
    m = 2 * zero // w
    audit = OneRunAudit(game="substitute", seed=5, gradient_canaries=m, gradient_width=w)
    assert audit.gradient_bits.max() == 2 ** w - 1 and audit.gradient_score() == "update, k = 4"
    model, opt, loader, engine = _linear_training(audit, n=n, zero=zero, steps=steps, batch=batch, sigma=sigma, lr=0.5)
    canaries = audit.attach(opt, loader, coordinates=_untouched(zero))
    assert canaries.scale == pytest.approx(1.0 / np.sqrt(w))
    _train(model, opt, loader, steps)
    scores = audit.gradient_scores(opt)
    assert scores.shape == (m, 2 ** w)
    u = (canaries.initial - canaries.flat(opt.params)).numpy().reshape(m, w)
    assert np.allclose(scores, u @ hypercube_codes(w).T)
    right = np.mean(np.argmax(scores, axis=1) == audit.gradient_bits)
    k = np.arange(steps + 1)
    q = batch / n
    predicted = float(np.sum(stats.binom.pmf(k, steps, q) * stats.norm.cdf(k / (np.sqrt(w) * sigma * np.sqrt(steps)))
                             ** w))
    se = np.sqrt(predicted * (1 - predicted) / m)
    assert abs(right - predicted) < 4 * se, (right, predicted)
    report = audit.finish(model, data_loader=loader, privacy_engine=engine, optimizer=opt)
    assert [r["procedure"] for r in report.rows] == ["mahloujifar"]   # Steinke's bound is for bits
    row = report.rows[0]
    assert row["score"] == "update, k = 4" and 0 < row["epsilon"] < row["perfect"]
    assert row["perfect"] > perfect_epsilon("mahloujifar", m, 1e-5)   # k-ary slots raise the cap
    with pytest.raises(ParameterError, match="gradient_width"):
        OneRunAudit(game="membership", seed=5, gradient_canaries=m, gradient_width=2)


def test_the_residual_score_is_the_canaries_own_channel_at_full_batch():
    """score "residual": the sum over steps of the released noisy gradient sum minus the records'
    clipped sum, at every canary coordinate: at q = 1 each slot's is s_i C T + N(0, T sigma^2 C^2)
    exactly, whatever the records do there (on coordinates the records move, unlike the final
    update), so its sign is right with probability Phi(sqrt(T) / sigma); it leaves the training
    and the update score as they were."""
    from subaudit.integrations.audit import GRADIENT_SCORES

    assert GRADIENT_SCORES == ("update", "residual")
    steps, sigma, n = 4, 1.5, 400
    m = 2 * 4   # every weight of nn.Linear(4, 2): coordinates the records move
    audit = OneRunAudit(game="substitute", seed=9, gradient_canaries=m)
    model, opt, loader, engine = _linear_training(audit, n=n, zero=0, steps=steps, batch=n, sigma=sigma, lr=0.5)
    canaries = audit.attach(opt, loader, coordinates=np.arange(m))
    _train(model, opt, loader, steps)
    assert canaries.sample_rate == 1.0
    residual = audit.gradient_scores(opt, "residual")[:, 0]
    noise = residual - (2 * audit.gradient_bits - 1) * steps   # C = 1, every slot drawn every step
    update = audit.gradient_scores(opt, "update")[:, 0]
    assert np.abs(noise).max() < 8 * sigma * np.sqrt(steps) and np.std(noise) > 0.3 * sigma * np.sqrt(steps)
    assert not np.allclose(update / update[0], residual / residual[0])   # the records move these weights
    # many slots: the sign accuracy is the Gaussian channel's
    zero, m = 1000, 2000
    audit = OneRunAudit(game="substitute", seed=9, gradient_canaries=m)
    model, opt, loader, engine = _linear_training(audit, n=n, zero=zero, steps=steps, batch=n, sigma=sigma, lr=0.5)
    audit.attach(opt, loader)
    _train(model, opt, loader, steps)
    right = np.mean((audit.gradient_scores(opt, "residual")[:, 0] > 0) == (audit.gradient_bits == 1))
    predicted = stats.norm.cdf(np.sqrt(steps) / sigma)
    assert abs(right - predicted) < 4 * np.sqrt(predicted * (1 - predicted) / m), (right, predicted)
    report = audit.finish(model, data_loader=loader, privacy_engine=engine, optimizer=opt,
                          gradient_score=GRADIENT_SCORES)
    assert [(r["score"], r["procedure"]) for r in report.rows] == [
        ("update", "steinke"), ("update", "mahloujifar"), ("residual", "steinke"), ("residual", "mahloujifar")]
    with pytest.raises(ParameterError, match="score"):
        audit.gradient_scores(opt, "gradient")


def test_bad_use_is_named():
    with pytest.raises(ParameterError, match="canaries"):  # too few for 95% by any procedure
        OneRunAudit(_pairs(4), game="substitute", seed=0)
    with pytest.raises(ParameterError, match="game"):
        OneRunAudit(_pairs(64), game="attribute", seed=0)
    with pytest.raises(AuditError, match="ModuleValidator"):  # a model Opacus cannot train privately
        OneRunAudit(_pairs(64), game="substitute", seed=0).start(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)))
    audit = OneRunAudit(_pairs(64, 4 + 8), game="substitute", seed=0, gradient_canaries=64)
    model, opt, loader, engine = _linear_training(audit, n=64, zero=8, steps=1, batch=16, sigma=1.0, lr=0.1,
                                                  poisson=False)
    with pytest.raises(AuditError, match="Poisson"):
        audit.attach(opt, loader)
    with pytest.raises(AuditError, match="Poisson"):
        audit.finish(model, data_loader=loader, privacy_engine=engine)
    # canaries outside the dataset: a loader over the bare base data
    audit = OneRunAudit(_pairs(64, 12), game="membership", seed=0)
    model, opt, loader, engine = _linear_training(audit, n=64, zero=8, steps=1, batch=16, sigma=1.0, lr=0.1)
    other = DataLoader(TensorDataset(torch.zeros(8, 12), torch.zeros(8, dtype=torch.long)), batch_size=4)
    net = nn.Linear(12, 2)
    _, _, other = PrivacyEngine().make_private(module=net, optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
                                               data_loader=other, noise_multiplier=1.0, max_grad_norm=1.0)
    with pytest.raises(AuditError, match="not in the training data"):
        audit.finish(model, data_loader=other, privacy_engine=engine)
    with pytest.raises(AuditError, match="make_private"):
        audit.finish(nn.Linear(12, 2), data_loader=loader, privacy_engine=engine)
    with pytest.raises(AuditError, match="no steps"):
        audit.finish(model, data_loader=loader, privacy_engine=engine)
    for x, y in loader:                     # one step: now only the scores are missing
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        break
    with pytest.raises(AuditError, match="nothing to score"):
        audit.finish(model, data_loader=loader, privacy_engine=engine, score=())
    assert audit.finish(model, data_loader=loader, privacy_engine=engine, score=("loss",)).rows


def test_an_audit_refuses_what_it_cannot_audit():
    """A seed that is not a whole number (1.7 was truncated to seed 1's bits; "abc" and None
    raised raw errors), start() called after training (the loss-drop scores were all 0 and
    every bound 0, silently) and a base dataset of other records than (input, integer label):
    refused, by name."""
    for seed in (1.7, "abc", None, True, -1):
        with pytest.raises(ParameterError, match="seed"):
            OneRunAudit(_pairs(64), game="substitute", seed=seed)
    assert OneRunAudit(_pairs(64), game="substitute", seed=np.int64(3)).seed == 3
    audit = OneRunAudit(_pairs(64, 12), game="membership", seed=0)
    model, opt, loader, engine = _linear_training(audit, n=64, zero=8, steps=1, batch=16, sigma=1.0, lr=0.1)
    _one_step(model, opt, loader)
    audit.start(model)                        # after training
    with pytest.raises(AuditError, match=r"parameters at finish\(\) are those at start\(\)"):
        audit.finish(model, data_loader=loader, privacy_engine=engine)
    _one_step(model, opt, loader)             # trained since start(): audited
    assert audit.finish(model, data_loader=loader, privacy_engine=engine).rows
    # a base dataset that does not hold (input, integer label) records: refused by name when its
    # dataset is built (the check swallowed every error; dicts then failed in torch's batching)
    class Dicts(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return {"image": torch.zeros(4), "label": 0}

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter([(torch.zeros(4), 0)])

    class Broken(Dicts):
        def __getitem__(self, i):
            raise OSError("disk gone")

    for base, refusal in ((Dicts(), r"base\[0\].*an \(input, label\) record"), (Stream(), "base.*map-style"),
                          (TensorDataset(torch.zeros(8, 4), torch.zeros(8)), r"base\[0\] label.*class index"),
                          ([(object(), 1)] * 8, r"base\[0\].*convertible to a tensor")):
        with pytest.raises(ParameterError, match=refusal):
            OneRunAudit(_pairs(64), game="substitute", seed=0).dataset(base)
    with pytest.raises(OSError, match="disk gone"):       # the base's own error, not swallowed
        OneRunAudit(_pairs(64), game="substitute", seed=0).dataset(Broken())


def test_misuse_fails_early_and_by_name():
    """Each misuse of the issue-40 probe gets a clear error before any training: canaries of
    another shape than the model or the data takes, float labels (truncated before), a
    one-output model (an IndexError before), a record paired with itself or in two slots,
    dataset() for a second base, and a loader without Poisson sampling given to start()."""
    pairs = _pairs(64)
    # canaries of different shapes, and of another shape than the model takes
    odd = list(pairs)
    odd[3] = ((torch.zeros(5), torch.tensor(0)), odd[3][1])
    with pytest.raises(ParameterError, match=r"canaries\[3\]\[0\].*first canary's shape \(4,\)"):
        OneRunAudit(odd, game="substitute", seed=0)
    with pytest.raises(AuditError, match=r"cannot take the canaries' inputs \(shape \(4,\)\)"):
        OneRunAudit(pairs, game="substitute", seed=0).start(nn.Linear(7, 2))
    # float labels on a ten-class model
    floats = [((x, torch.tensor(float(y))), (x2, torch.tensor(float(y2)))) for (x, y), (x2, y2) in pairs]
    with pytest.raises(ParameterError, match=r"canaries\[0\]\[0\] label.*a class index"):
        OneRunAudit(floats, game="substitute", seed=0)
    with pytest.raises(ParameterError, match="label"):
        OneRunAudit([((x, 2.5), (x2, 1)) for (x, _), (x2, _) in pairs], game="substitute", seed=0)
    # a one-output model, and labels beyond the model's classes
    with pytest.raises(AuditError, match="one logit per class"):
        OneRunAudit(pairs, game="substitute", seed=0).start(nn.Linear(4, 1))
    high = [((x, torch.tensor(5)), twin) for (x, _), twin in pairs]
    with pytest.raises(AuditError, match="not classes of a model with 2 outputs"):
        OneRunAudit(high, game="substitute", seed=0).start(nn.Linear(4, 2))
    # a record paired with itself; the same record in two slots
    with pytest.raises(ParameterError, match=r"canaries\[5\]\[1\].*equals canaries\[5\]\[0\]"):
        OneRunAudit(pairs[:5] + [(pairs[5][0], pairs[5][0])] + pairs[6:], game="substitute", seed=0)
    with pytest.raises(ParameterError, match=r"canaries\[9\]\[0\].*equals canaries\[2\]\[0\]"):
        OneRunAudit(pairs[:9] + [(pairs[2][0], pairs[9][1])] + pairs[10:], game="substitute", seed=0)
    # dataset() again: the same dataset for the same base, an error for another
    audit = OneRunAudit(pairs, game="membership", seed=0)
    base = TensorDataset(torch.zeros(8, 4), torch.zeros(8, dtype=torch.long))
    assert audit.dataset(base) is audit.dataset(base)
    with pytest.raises(AuditError, match="another base dataset"):
        audit.dataset(TensorDataset(torch.ones(8, 4), torch.zeros(8, dtype=torch.long)))
    with pytest.raises(AuditError, match=r"inputs have shape \(4,\) but the base dataset's have \(3,\)"):
        OneRunAudit(pairs, game="membership", seed=0).dataset(TensorDataset(torch.zeros(8, 3),
                                                                            torch.zeros(8, dtype=torch.long)))
    # a loader without Poisson sampling: refused at start(), before any training
    audit = OneRunAudit(pairs, game="substitute", seed=0)
    model = nn.Linear(4, 2)
    loader = DataLoader(audit.dataset(TensorDataset(torch.randn(64, 4), torch.zeros(64, dtype=torch.long))),
                        batch_size=16)
    model, _, loader = PrivacyEngine().make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                                    data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0,
                                                    poisson_sampling=False)
    with pytest.raises(AuditError, match="Poisson"):
        audit.start(model, data_loader=loader)
