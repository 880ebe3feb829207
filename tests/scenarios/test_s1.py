"""Tests for subaudit.scenarios.s1 (S1 worst-case dataset canary)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import subaudit.scenarios.s1 as wc
from subaudit.validation import ParameterError
from subaudit.scenarios.s1 import S1Audit, s1_score, simulate_s1


def _direct_llr(g, t, q, sigma, clip, adjacency):
    """Eq. (3) summed term by term with scipy.stats densities (no log tricks)."""
    g = np.asarray(g, dtype=np.float64)
    k = np.arange(t + 1)
    w = stats.binom.pmf(k, t, q)
    sd = np.sqrt(t) * sigma * clip
    p_d = (w[None, :] * stats.norm.pdf(g[:, None], loc=k[None, :] * clip, scale=sd)).sum(1)
    if adjacency == "substitute":
        p_dp = (w[None, :] * stats.norm.pdf(g[:, None], loc=-k[None, :] * clip, scale=sd)).sum(1)
    else:
        p_dp = stats.norm.pdf(g, loc=0.0, scale=sd)
    return np.log(p_d) - np.log(p_dp)


@pytest.mark.parametrize("adjacency", ["substitute", "add-remove"])
@pytest.mark.parametrize(
    "t,q,sigma,clip",
    [(1, 0.5, 1.0, 1.0), (5, 0.3, 0.7, 1.5), (12, 0.0625, 1.2, 0.5), (8, 0.9, 2.0, 1.0)],
)
def test_score_is_exact_log_likelihood_ratio(adjacency, t, q, sigma, clip):
    sd = np.sqrt(t) * sigma * clip
    g = np.linspace(-4 * sd - t * clip, 4 * sd + t * clip, 41)
    got = s1_score(g, t, q, sigma, clip=clip, adjacency=adjacency)
    want = _direct_llr(g, t, q, sigma, clip, adjacency)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_q1_substitute_is_gaussian_llr():
    # N(+tC, t s^2 C^2) vs N(-tC, t s^2 C^2): LLR = 2 t C g / (t sigma^2 C^2) = 2 g / (sigma^2 C).
    t, sigma, clip = 500, 89.128, 1.0
    g = np.linspace(-5000, 5000, 101)
    np.testing.assert_allclose(s1_score(g, t, 1.0, sigma, clip), 2 * g / (sigma**2 * clip), rtol=1e-10, atol=1e-12)
    t, sigma, clip = 7, 0.8, 2.5
    g = np.linspace(-30, 30, 13)
    np.testing.assert_allclose(s1_score(g, t, 1.0, sigma, clip), 2 * g / (sigma**2 * clip), rtol=1e-10, atol=1e-12)


def test_q1_add_remove_is_gaussian_llr():
    # N(tC, t sigma^2 C^2) vs N(0, t sigma^2 C^2): LLR = (g - tC/2) / (sigma^2 C).
    t, sigma, clip = 20, 1.3, 0.7
    g = np.linspace(-40, 40, 17)
    np.testing.assert_allclose(
        s1_score(g, t, 1.0, sigma, clip, adjacency="add-remove"),
        (g - t * clip / 2) / (sigma**2 * clip),
        rtol=1e-10,
        atol=1e-12,
    )


def test_score_stable_and_monotone_for_extreme_gradients():
    # The likelihood ratio of the two binomial mixtures is monotone in g (MLR).
    g = np.linspace(-1e5, 1e5, 2001)
    for adjacency in ("substitute", "add-remove"):
        s = s1_score(g, 500, 0.0625, 1.677, adjacency=adjacency)
        assert np.all(np.isfinite(s))
        assert np.all(np.diff(s) >= -1e-9)
    # antisymmetric under substitute: LLR(-g) = -LLR(g)
    s = s1_score(g, 300, 0.25, 3.0)
    np.testing.assert_allclose(s, -s[::-1], rtol=1e-10, atol=1e-8)


def test_score_blocking_does_not_change_values(monkeypatch):
    g = np.random.default_rng(3).normal(0, 40, size=1000)
    full = s1_score(g, 200, 0.1, 2.0)
    monkeypatch.setattr(wc, "_BLOCK_ELEMENTS", 500)  # two runs per block of 201 k values
    blocked = s1_score(g, 200, 0.1, 2.0)
    np.testing.assert_array_equal(full, blocked)


def test_scalar_and_shape():
    assert isinstance(s1_score(0.3, 10, 0.5, 1.0), float)
    g = np.zeros((3, 4))
    assert s1_score(g, 10, 0.5, 1.0).shape == (3, 4)


def test_labels_exactly_balanced_and_documented_order():
    a = simulate_s1(2.0, 0.3, 50, 123, seed=5)
    assert isinstance(a, S1Audit)
    assert a.labels.dtype == np.int8
    assert a.labels.shape == (246,)
    assert int(a.labels.sum()) == 123
    assert np.all(a.labels[:123] == 1) and np.all(a.labels[123:] == 0)
    assert a.scores.shape == (1, 246) and a.scores.dtype == np.float64
    assert list(a.steps) == [50]
    assert a.runs_per_world == 123


def test_determinism():
    a = simulate_s1(1.5, 0.25, 40, 500, seed=11, checkpoints=[10, 40])
    b = simulate_s1(1.5, 0.25, 40, 500, seed=11, checkpoints=[10, 40])
    c = simulate_s1(1.5, 0.25, 40, 500, seed=12, checkpoints=[10, 40])
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(a.scores, c.scores)
    assert np.mean(a.scores == c.scores) < 0.01


def test_scores_are_scores_of_the_simulated_gradients():
    a = simulate_s1(1.1, 0.2, 60, 300, seed=2, checkpoints=[1, 7, 30, 60], clip=2.0, keep_gradients=True)
    assert a.gradients is not None
    for i, t in enumerate(a.steps):
        np.testing.assert_allclose(a.scores[i], s1_score(a.gradients[i], int(t), 0.2, 1.1, clip=2.0),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("adjacency", ["substitute", "add-remove"])
def test_gradient_moments(adjacency):
    # D: g_t = K C + N(0, t sigma^2 C^2), K ~ Bin(t, q); D': -K C (substitute) or noise only.
    sigma, q, t, clip, R = 1.5, 0.3, 40, 2.0, 40_000
    a = simulate_s1(sigma, q, t, R, adjacency=adjacency, seed=7, clip=clip, keep_gradients=True)
    g_d, g_dp = a.gradients[0, :R], a.gradients[0, R:]
    var_d = t * (sigma**2 + q * (1 - q)) * clip**2
    mean_d = t * q * clip
    se = np.sqrt(var_d / R)
    assert abs(g_d.mean() - mean_d) < 5 * se
    assert abs(g_d.var() / var_d - 1) < 0.04
    if adjacency == "substitute":
        assert abs(g_dp.mean() + mean_d) < 5 * se
        assert abs(g_dp.var() / var_d - 1) < 0.04
    else:
        var0 = t * sigma**2 * clip**2
        assert abs(g_dp.mean()) < 5 * np.sqrt(var0 / R)
        assert abs(g_dp.var() / var0 - 1) < 0.04


def test_checkpoint_path_matches_single_step_in_distribution():
    sigma, q, T, R = 1.0, 0.25, 200, 20_000
    path = simulate_s1(sigma, q, T, R, seed=21, checkpoints=[50, 120, 200], keep_gradients=True)
    single = simulate_s1(sigma, q, T, R, seed=22, keep_gradients=True)
    single50 = simulate_s1(sigma, q, 50, R, seed=23, keep_gradients=True)
    for world in (slice(0, R), slice(R, 2 * R)):
        # final checkpoint ~ one-shot simulation at T
        assert stats.ks_2samp(path.gradients[-1, world], single.gradients[0, world]).pvalue > 1e-3
        assert stats.ks_2samp(path.scores[-1, world], single.scores[0, world]).pvalue > 1e-3
        # first checkpoint ~ one-shot simulation at t = 50
        assert stats.ks_2samp(path.gradients[0, world], single50.gradients[0, world]).pvalue > 1e-3
        # increments: same path, independent increments -> corr(g_s, g_t) = sqrt(s / t)
        for i, j in ((0, 1), (0, 2), (1, 2)):
            s_, t_ = path.steps[i], path.steps[j]
            r = np.corrcoef(path.gradients[i, world], path.gradients[j, world])[0, 1]
            assert abs(r - np.sqrt(s_ / t_)) < 0.02
        inc = path.gradients[2, world] - path.gradients[1, world]
        assert abs(np.corrcoef(inc, path.gradients[1, world])[0, 1]) < 0.03
        var_inc = (200 - 120) * (sigma**2 + q * (1 - q))
        assert abs(inc.var() / var_inc - 1) < 0.05


def test_default_checkpoint_and_no_gradients():
    a = simulate_s1(1.0, 1.0, 10, 5, seed=0)
    assert a.gradients is None
    assert a.steps.tolist() == [10]


def test_q1_world_separation_matches_gaussian():
    # At q = 1 the score is 2 g / sigma^2 with g ~ N(+-T, T sigma^2): check mean of scores.
    sigma, T, R = 10.0, 100, 20_000
    a = simulate_s1(sigma, 1.0, T, R, seed=4)
    s_d = a.scores[0, :R]
    mean_expected = 2 * T / sigma**2
    sd_expected = 2 * np.sqrt(T) * sigma / sigma**2
    assert abs(s_d.mean() - mean_expected) < 5 * sd_expected / np.sqrt(R)
    assert abs(s_d.std() / sd_expected - 1) < 0.03


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(sigma=0.0), "sigma"),
        (dict(sigma=-1.0), "sigma"),
        (dict(q=0.0), "q"),
        (dict(q=1.5), "q"),
        (dict(steps=0), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(runs_per_world=0), "runs"),
        (dict(adjacency="group"), "adjacency"),
        (dict(clip=0.0), "clip"),
        (dict(checkpoints=[5, 3]), "checkpoints"),
        (dict(checkpoints=[5, 50]), "checkpoints"),
        (dict(checkpoints=[]), "checkpoints"),
        (dict(seed=-1), "seed"),
    ],
)
def test_simulate_validation(kwargs, name):
    args = dict(sigma=1.0, q=0.5, steps=10, runs_per_world=10)
    args.update(kwargs)
    with pytest.raises(ParameterError) as err:
        simulate_s1(**args)
    assert err.value.name == name


def test_score_validation():
    with pytest.raises(ParameterError) as err:
        s1_score(1.0, 10, 0.0, 1.0)
    assert err.value.name == "q"
    with pytest.raises(ParameterError) as err:
        s1_score(1.0, 0, 0.5, 1.0)
    assert err.value.name == "steps"
    with pytest.raises(ParameterError) as err:
        s1_score(1.0, 10, 0.5, 1.0, adjacency="replace")
    assert err.value.name == "adjacency"
    with pytest.raises(ValueError):
        s1_score(np.nan, 10, 0.5, 1.0)
