"""One-run procedures on pair scores (subaudit.estimation.procedures): the guess rules by hand,
validity on mechanisms with known epsilon (enough audits that a 10% exceedance rate fails where
5% is nominal), the families of the f-DP bound, and the fewest canaries that can show anything."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy import special, stats

from subaudit.accounting import epsilon as accountant_epsilon
from subaudit.accounting.gdp import gdp_epsilon
from subaudit.estimation.guesses import default_guess_grid
from subaudit.estimation.one_run import DPSGDCurve, fdp_epsilon, steinke_epsilon, steinke_p_value
from subaudit.estimation.procedures import (
    PROCEDURES,
    bound_rows,
    least_canaries,
    perfect_epsilon,
    procedure_epsilon,
    procedure_falsifies,
    ScoreSet,
)
from subaudit.validation import ParameterError

DELTA = 1e-5
GAMES = ("membership", "substitute")


def _statistic(procedure: str, game: str, scores: np.ndarray) -> np.ndarray:
    """The procedures' statistics written out: Steinke reads z_i's score in the membership game and
    the pair's difference in the substitute game; Mahloujifar the difference in both."""
    first, diff = scores[..., 0], scores[..., 0] - scores[..., 1]
    return first if (procedure == "steinke" and game == "membership") else diff


def _counts(procedure: str, stat: np.ndarray, bits: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(r, correct guesses of every audit) at each grid size: stat and bits are (audits, m)."""
    m = stat.shape[1]
    out = []
    for r in default_guess_grid(m):
        if procedure == "steinke":  # 'in' on the highest ceil(r/2), 'out' on the lowest floor(r/2)
            order = np.argsort(-stat, axis=1, kind="stable")
            up, down = order[:, :r - r // 2], order[:, m - r // 2:]
            v = np.take_along_axis(bits, up, 1).sum(1) + (~np.take_along_axis(bits, down, 1)).sum(1)
        else:  # the r largest |stat|, guessed by sign
            top = np.argsort(-np.abs(stat), axis=1, kind="stable")[:, :r]
            v = ((np.take_along_axis(stat, top, 1) > 0) == np.take_along_axis(bits, top, 1)).sum(1)
        out.append((r, v))
    return out


def _margins(m: int, r: int, v: np.ndarray, alpha: float, fbar_inv) -> np.ndarray:
    """Mahloujifar et al.'s reconstruction recursion, vectorised over audits (their appendix's
    "audit_rh_with_cap", k = 2); > 0: the curve is falsified."""
    v = np.asarray(v, dtype=float)
    rr, h = alpha * v / m, alpha * (r - v) / m
    done = v <= 0
    for i in range(int(v.max()) - 1, -1, -1):
        live = (i < v) & ~done
        if not live.any():
            continue
        h_new = np.maximum(h, fbar_inv(rr))
        stop = h_new == h
        done |= live & stop
        step = live & ~stop
        rr = np.where(step, np.minimum(rr + i / (r - i) * (h_new - h), 1.0), rr)
        h = np.where(step, h_new, h)
    return rr + h - r / m


def _dp_inv(eps: float, delta: float):
    return lambda y: np.maximum(0.0, np.maximum((y - delta) * math.exp(-eps), 1 - delta - math.exp(eps) * (1 - y)))


def _gdp_inv(mu: float):
    return lambda y: special.ndtr(special.ndtri(y) - mu)


def exceeds_by_hand(procedure: str, family: str, game: str, scores: np.ndarray, bits: np.ndarray, eps: float,
                    alpha: float = 0.05) -> np.ndarray:
    """The papers' tests written out here, independently of the library: whether each audit's
    bound would exceed ``eps`` (the bound is the largest falsified claim and falsification is
    monotone in epsilon, so it exceeds eps iff some guess count's test, at alpha / grid,
    falsifies the claim at eps itself)."""
    stat = _statistic(procedure, game, scores)
    counts = _counts(procedure, stat, bits)
    level = alpha / len(counts)
    m = stat.shape[1]
    out = np.zeros(len(bits), bool)
    for r, v in counts:
        if procedure == "steinke":
            p = {int(x): steinke_p_value(m, r, int(x), eps, DELTA) for x in np.unique(v)}
            out |= np.array([p[int(x)] <= level for x in v])
        else:
            inv = _dp_inv(eps, DELTA) if family == "dp" else _gdp_inv(1 / _sigma_of(eps))
            out |= _margins(m, r, v, level, inv) > 0
    return out


def exceeds(procedure: str, family: str, game: str, scores: np.ndarray, bits: np.ndarray, eps: float,
            delta: float = DELTA, **options) -> np.ndarray:
    """The library's decision, audit by audit: whether procedure_epsilon would exceed ``eps``
    (procedure_falsifies, which the tests below tie to procedure_epsilon at its own bound)."""
    return np.array([procedure_falsifies(procedure, s, b, eps, delta, game=game, family=family, **options)
                     for s, b in zip(scores, bits)])


def _sigma_of(eps: float) -> float:
    import dp_accounting

    return float(dp_accounting.get_sigma_gaussian(eps, DELTA))


# --------------------------------------------------------------------------- mechanisms
# Each draws `audits` one-run audits of m canaries: pair scores (audits, m, 2) and bits (audits, m).
# Canaries are independent mechanisms, so changing one bit changes one canary's output: the
# audit's mechanism has the canary's own (epsilon, delta).

def randomised_response(rng, audits, m, game, eps=1.0):
    """Each bit reported through randomised response: exactly eps-DP in both games."""
    bits = rng.integers(0, 2, (audits, m)).astype(bool)
    said = bits ^ (rng.random((audits, m)) < 1 / (1 + math.exp(eps)))
    u = np.where(said, 1.0, -1.0)
    twin = -u if game == "substitute" else np.zeros_like(u)
    return np.stack([u, twin], axis=-1), bits, eps


def delta_spending(rng, audits, m, game, eps=1.0, delta=0.02):
    """A mechanism that spends its delta: each slot's bit is revealed outright (score +-10) with
    probability delta, and otherwise reported through randomised response at eps; each bit is
    (eps, delta)-DP and no better, so a bound that ignores delta exceeds eps."""
    scores, bits, _ = randomised_response(rng, audits, m, game, eps)
    reveal = rng.random((audits, m)) < delta
    u = np.where(reveal, np.where(bits, 10.0, -10.0), scores[..., 0])
    twin = -u if game == "substitute" else np.zeros_like(u)
    return np.stack([u, twin], axis=-1), bits, eps


def gaussian(rng, audits, m, game, s=4.0):
    """Gradient canaries at q = 1, T = 1: substitute scores (u, -u), u = +-1 + N(0, s^2), are
    2/s-GDP per bit; membership scores (b + N(0, s^2), N(0, s^2)) are 1/s-GDP."""
    bits = rng.integers(0, 2, (audits, m)).astype(bool)
    if game == "substitute":
        u = (2.0 * bits - 1) + rng.normal(0, s, (audits, m))
        return np.stack([u, -u], axis=-1), bits, gdp_epsilon(2 / s, DELTA)
    scores = np.stack([bits + rng.normal(0, s, (audits, m)), rng.normal(0, s, (audits, m))], axis=-1)
    return scores, bits, gdp_epsilon(1 / s, DELTA)


def subsampled_gaussian(rng, audits, m, game, q=0.01, sigma=0.5, steps=4):
    """A canary of DP-SGD at a small sampling rate and few steps: each step it is drawn with
    probability q and adds +1 (z_i; in the substitute game z'_i adds -1 instead) to N(0, sigma^2);
    scored by the log-likelihood ratio of its steps. Its curve is far from Gaussian; the true
    epsilon is the accountant's (add/remove or substitute, upper bound)."""
    bits = rng.integers(0, 2, (audits, m)).astype(bool)
    shift = np.where(bits, 1.0, -1.0) if game == "substitute" else bits.astype(float)
    x = (rng.random((audits, m, steps)) < q) * shift[..., None] + rng.normal(0, sigma, (audits, m, steps))
    def mix(c):  # log of (1 - q) + q N(c, s^2) / N(0, s^2) at each step
        return np.log1p(q * np.expm1((2 * c * x - c * c) / (2 * sigma ** 2)))

    if game == "substitute":
        u = (mix(1.0) - mix(-1.0)).sum(-1)
        scores = np.stack([u, -u], axis=-1)
        adjacency = "substitute"
    else:
        twin = rng.normal(0, sigma, (audits, m, steps))
        scores = np.stack([mix(1.0).sum(-1), np.log1p(q * np.expm1((2 * twin - 1) / (2 * sigma ** 2))).sum(-1)],
                          axis=-1)
        adjacency = "add-remove"
    return scores, bits, accountant_epsilon(sigma, q, steps, DELTA, adjacency).epsilon


AUDITS = 1000
ALLOWED = int(stats.binom.isf(1e-3, AUDITS, 0.05))  # 73: a true 5% rate exceeds it with probability < 1e-3


def test_validity_check_can_fail():
    """The allowance separates the nominal 5% from 10%: a true exceedance rate of 10% passes
    the check with probability under 0.2%."""
    assert ALLOWED == 73
    assert stats.binom.cdf(ALLOWED, AUDITS, 0.10) < 0.002
    assert stats.binom.sf(ALLOWED, AUDITS, 0.05) < 0.001


#: The mechanisms the validity tests audit, each at its delta and canary count: the sharp cases
#: (randomised response, whose curve is f_{eps,0} itself, and a mechanism that spends its delta)
#: at m = 1,000, where dropping the Bonferroni correction or delta takes the exceedance rate far
#: past the allowance; the Gaussian and subsampled ones at m = 500.
MECHANISMS = {randomised_response: (DELTA, 1000), delta_spending: (0.02, 1000), gaussian: (DELTA, 500),
              subsampled_gaussian: (DELTA, 500)}


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("mechanism", list(MECHANISMS))
def test_default_procedures_are_valid(mechanism, game):
    """Steinke and Mahloujifar as the library runs them by default (the (eps, delta) curve, the
    Bonferroni-corrected guess count) exceed the mechanism's true epsilon in at most the nominal
    5% of 1,000 audits, on four mechanisms and both games. The sharp cases are where an invalid
    bound shows: randomised response (1-3% of audits exceed; without the Bonferroni correction
    16-19%, with the mu-GDP curve 98%) and the delta-spending mechanism (none exceed; with delta
    dropped from the curve or from Steinke's term, 63-73%). At m = 500 one-run bounds stay far
    below the Gaussian and subsampled mechanisms' epsilon (none exceeds 0.6 eps), so there the
    check shows only that nothing breaks."""
    delta, m = MECHANISMS[mechanism]
    rng = np.random.default_rng(zlib.crc32(f"{mechanism.__name__} {game}".encode()))
    scores, bits, eps = mechanism(rng, AUDITS, m, game)
    for procedure in PROCEDURES:
        over = exceeds(procedure, "dp", game, scores, bits, eps, delta)
        assert over.sum() <= ALLOWED, (procedure, game, over.sum(), eps)


@pytest.mark.parametrize("game", GAMES)
def test_the_checks_see_an_invalid_bound(game):
    """The same audits fail the check when the bound is made invalid through the library's own
    switches: the uncorrected best guess count (``bonferroni=False``) on randomised response."""
    rng = np.random.default_rng(zlib.crc32(f"randomised_response {game}".encode()))
    scores, bits, eps = randomised_response(rng, AUDITS, 1000, game)
    for procedure in PROCEDURES:
        assert exceeds(procedure, "dp", game, scores, bits, eps, bonferroni=False).sum() > 2 * ALLOWED


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("mechanism", list(MECHANISMS))
def test_procedure_epsilon_is_what_the_checks_decide(mechanism, game):
    """procedure_epsilon with its defaults sits exactly where procedure_falsifies with its defaults
    turns (falsified just below the bound, not just above), on audits of every mechanism (at
    delta = 1e-5; a zero bound falsifies nothing); and
    procedure_falsifies is the papers' tests as written out in this file, on 100 audits."""
    delta, m = MECHANISMS[mechanism]
    rng = np.random.default_rng(zlib.crc32(f"{mechanism.__name__} {game} tie".encode()))
    scores, bits, eps = mechanism(rng, 100, m, game)
    for procedure in PROCEDURES:
        for a in range(4):
            bound = procedure_epsilon(procedure, scores[a], bits[a], DELTA, game=game)
            below = procedure_falsifies(procedure, scores[a], bits[a], max(bound - 1e-6, 0.0), DELTA, game=game)
            assert below == (bound > 0), (procedure, a, bound)
            assert not procedure_falsifies(procedure, scores[a], bits[a], bound + 1e-6, DELTA, game=game)
        if delta == DELTA:
            for claim in (0.5 * eps, eps):
                assert np.array_equal(exceeds(procedure, "dp", game, scores, bits, claim, delta),
                                      exceeds_by_hand(procedure, "dp", game, scores, bits, claim))


@pytest.mark.parametrize("game", GAMES)
def test_gaussian_option_is_invalid_beyond_gaussian_mechanisms(game):
    """The mu-GDP test (family "gdp") is what keeps it out of the default: randomised response is
    eps-DP, and its curve lies below the matched GDP curve in the middle (the largest gap, 0.37
    at x = 0.27 for eps = 1), so at m = 500 the mu-GDP bound exceeds its epsilon in most audits;
    on the Gaussian mechanism, its own family, it stays within the nominal rate. The same check
    at a claim 60% below the Gaussian's epsilon flags more audits: it can fail there too."""
    rng = np.random.default_rng(11)
    scores, bits, eps = randomised_response(rng, AUDITS, 500, game)
    assert np.array_equal(exceeds("mahloujifar", "gdp", game, scores[:100], bits[:100], eps),
                          exceeds_by_hand("mahloujifar", "gdp", game, scores[:100], bits[:100], eps))
    assert exceeds("mahloujifar", "gdp", game, scores, bits, eps).sum() > 500
    assert exceeds("mahloujifar", "dp", game, scores, bits, eps).sum() <= ALLOWED
    scores, bits, eps = gaussian(rng, AUDITS, 500, game, s=2.0)
    assert exceeds("mahloujifar", "gdp", game, scores, bits, eps).sum() <= ALLOWED
    assert exceeds("mahloujifar", "gdp", game, scores, bits, 0.4 * eps).sum() > (5 if game == "membership" else 100)


def test_subsampled_gaussian_is_not_a_counterexample_at_these_canary_counts():
    """DP-SGD at a small q and few steps has a curve far from Gaussian, but heavier-tailed: matched
    at the same (epsilon, delta) it is *more* private than GDP except at tiny type-I errors. For
    T = 1 in closed form (q = 0.01, sigma = 0.7): the curve dips below the matched GDP curve only
    at x < 1e-4 and by less than 1e-5, which an audit of m canaries cannot see below m of about
    1e7; so at m = 500 the mu-GDP bound stays within the nominal rate there too."""
    q, sigma = 0.01, 0.7
    eps = accountant_epsilon(sigma, q, 1, DELTA, "add-remove").epsilon
    mu = 1 / _sigma_of(eps)
    t = np.linspace(-8, 12, 400_001) * sigma
    absent = stats.norm.cdf(t / sigma)
    present = (1 - q) * absent + q * stats.norm.cdf((t - 1) / sigma)
    grid = np.geomspace(1e-7, 0.5, 2000)
    # absent vs present (reject "absent" above t) and present vs absent (reject "present" below t)
    curve = np.minimum(np.interp(grid, (1 - absent)[::-1], present[::-1]), np.interp(grid, present, 1 - absent))
    gdp_curve = stats.norm.cdf(stats.norm.isf(grid) - mu)
    below = grid[curve < gdp_curve - 1e-9]
    assert below.size and below.max() < 1e-4 and np.max(gdp_curve - curve) < 1e-5
    rng = np.random.default_rng(14)
    scores, bits, eps_true = subsampled_gaussian(rng, AUDITS, 500, "membership", q=q, sigma=sigma, steps=1)
    assert eps_true == pytest.approx(eps)
    assert exceeds("mahloujifar", "gdp", "membership", scores, bits, eps).sum() <= ALLOWED


@pytest.mark.parametrize("procedure", list(PROCEDURES))
@pytest.mark.parametrize("game", GAMES)
def test_procedure_is_its_rule_and_estimator(procedure, game):
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2, 500)
    scores = np.stack([bits + rng.normal(0, 0.7, 500), rng.normal(0, 0.7, 500) - 0.5 * bits], axis=1)
    got = procedure_epsilon(procedure, scores, bits, DELTA, game=game)
    stat = _statistic(procedure, game, scores)[None]
    level = 0.05 / len(default_guess_grid(500))
    by_hand = max(steinke_epsilon(500, r, int(v[0]), DELTA, level) if procedure == "steinke"
                  else fdp_epsilon(500, r, int(v[0]), DELTA, level)
                  for r, v in _counts(procedure, stat, bits[None].astype(bool)))
    assert got == by_hand and got > 0.5


@pytest.mark.parametrize("procedure", list(PROCEDURES))
def test_substitute_procedures_use_both_scores(procedure):
    """In the substitute game one member of each pair was trained on, so both scores are
    evidence: changing the twins' scores changes every procedure's bound there; in the membership
    game Steinke et al.'s procedure reads z_i's score alone (the twin was never in the data)."""
    rng = np.random.default_rng(2)
    bits = rng.integers(0, 2, 1000)
    first = 0.8 * bits + rng.normal(0, 0.5, 1000)
    twins = [-0.8 * bits + rng.normal(0, 0.5, 1000), rng.normal(0, 0.5, 1000)]
    sub = [procedure_epsilon(procedure, np.stack([first, t], 1), bits, DELTA, game="substitute") for t in twins]
    assert sub[0] > sub[1] > 0
    mem = [procedure_epsilon(procedure, np.stack([first, t], 1), bits, DELTA, game="membership") for t in twins]
    assert (mem[0] == mem[1]) == (procedure == "steinke")


def test_families_of_the_f_dp_bound():
    """The Gaussian family is a stronger claim than the (eps, delta) curve on the same counts;
    DP-SGD's own curve at q = 1 and one step is the Gaussian mechanism's, so its bound is the
    mu-GDP one (to the accountant's error); at q < 1 it tests the subsampled curve."""
    scores = np.stack([np.r_[np.ones(450), -np.ones(50)], np.zeros(500)], 1)
    bits = np.ones(500, int)
    bits[::2] = 0
    scores[bits == 0, 0] *= -1
    dp = procedure_epsilon("mahloujifar", scores, bits, DELTA, game="membership")
    gdp = procedure_epsilon("mahloujifar", scores, bits, DELTA, game="membership", family="gdp")
    gauss = procedure_epsilon("mahloujifar", scores, bits, DELTA, game="membership", family="dpsgd",
                              history=[(1.0, 1.0, 1)])
    assert 0 < dp < gdp and gauss == pytest.approx(gdp, rel=0.02)
    assert fdp_epsilon(1000, 1000, 800, DELTA, family="dpsgd", mechanism=DPSGDCurve(1.0, 1)) == pytest.approx(
        fdp_epsilon(1000, 1000, 800, DELTA, family="gdp"), rel=0.02)
    with pytest.raises(ParameterError, match="history"):
        procedure_epsilon("mahloujifar", scores, bits, DELTA, game="membership", family="dpsgd")
    # Steinke's bound is an (eps, delta) one whatever family is asked of the f-DP procedures
    assert procedure_epsilon("steinke", scores, bits, DELTA, game="membership", family="gdp") == \
        procedure_epsilon("steinke", scores, bits, DELTA, game="membership")


def test_rows_name_the_family():
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2, 64)
    s = ScoreSet("gradient", "update", np.stack([bits + rng.normal(0, 0.3, 64)] * 2, 1) * [1, -1], bits, True)
    rows = bound_rows([s], game="substitute", history=[(1.0, 0.1, 50)], delta=DELTA, alpha=0.05, family="gdp")
    assert [(r["procedure"], r["family"]) for r in rows] == [("steinke", "dp"), ("mahloujifar", "gdp")]
    assert rows[1]["perfect"] == perfect_epsilon("mahloujifar", 64, DELTA, family="gdp") > rows[1]["epsilon"]
    assert rows[0]["ceiling"] is not None


@pytest.mark.parametrize("procedure", list(PROCEDURES))
def test_least_canaries_is_where_perfect_guesses_first_show_something(procedure):
    need = least_canaries(procedure, DELTA)
    assert perfect_epsilon(procedure, need - 1, DELTA) == 0.0 < perfect_epsilon(procedure, need, DELTA)
    # more canaries can show more; a sterner confidence needs more of them
    assert perfect_epsilon(procedure, 1000, DELTA) > perfect_epsilon(procedure, 100, DELTA)
    assert least_canaries(procedure, DELTA, 0.001) > need


def test_the_table_of_least_canaries_holds_what_perfect_guesses_give():
    """Each count of the table the configuration check reads (the shipped settings) is where
    perfect guesses first give a positive bound, derived again here from the bound itself."""
    from subaudit.estimation.procedures import LEAST_CANARIES

    assert {(p, f) for p, f, *_ in LEAST_CANARIES} == {("steinke", "dp"), ("mahloujifar", "dp"),
                                                         ("mahloujifar", "gdp")}
    derived = {}
    for (procedure, family, k, alpha, delta), count in LEAST_CANARIES.items():
        perfect = [perfect_epsilon(procedure, m, delta, alpha, family=family, k=k) for m in range(1, count + 1)]
        assert perfect[-1] > 0.0, (procedure, family, count)
        derived[(procedure, family, k, alpha, delta)] = next(m for m, e in enumerate(perfect, 1) if e > 0.0)
        assert least_canaries(procedure, delta, alpha, family=family, k=k) == count
    assert derived == LEAST_CANARIES, f"paste into procedures.LEAST_CANARIES: {derived}"
    # a setting outside the table is searched
    assert least_canaries("steinke", 1e-5, 0.01) == 10


def test_bad_pair_scores_are_named():
    with pytest.raises(ParameterError, match="scores"):
        procedure_epsilon("steinke", np.zeros((5, 3)), np.zeros(5), DELTA, game="membership")
    with pytest.raises(ParameterError, match="bits"):
        procedure_epsilon("steinke", np.zeros((5, 2)), np.full(5, 2), DELTA, game="membership")
    with pytest.raises(ParameterError, match="procedure"):
        procedure_epsilon("nope", np.zeros((5, 2)), np.zeros(5), DELTA, game="membership")
    with pytest.raises(ParameterError, match="game"):
        procedure_epsilon("steinke", np.zeros((5, 2)), np.zeros(5), DELTA, game="replace")
    with pytest.raises(ParameterError, match="family"):
        procedure_epsilon("mahloujifar", np.zeros((5, 2)), np.zeros(5), DELTA, game="membership", family="rdp")


def test_the_dpsgd_cap_is_its_own_curves():
    """The DP-SGD family's cap is perfect guessing tested against DP-SGD's own curve, not the
    (eps, delta) family's: at q = 1 and one step DP-SGD is the Gaussian mechanism, so its cap is
    the mu-GDP test's (closed form) to the accountant's error, well above the (eps, delta) cap;
    its rows carry it, and name their assumption wherever printed."""
    from subaudit.estimation.one_run import FDP_FAMILIES
    from subaudit.estimation.procedures import claim_prefix

    history = ((0.5, 1.0, 1),)
    dpsgd = perfect_epsilon("mahloujifar", 1000, DELTA, family="dpsgd", game="substitute", history=history)
    assert dpsgd == pytest.approx(perfect_epsilon("mahloujifar", 1000, DELTA, family="gdp"), rel=0.01)
    assert dpsgd > 1.5 * perfect_epsilon("mahloujifar", 1000, DELTA)
    with pytest.raises(ParameterError, match="history"):
        perfect_epsilon("mahloujifar", 1000, DELTA, family="dpsgd")
    bits = np.arange(1000) % 2
    s = ScoreSet("gradient", "update", np.stack([2.0 * bits - 1, 1 - 2.0 * bits], 1), bits, True)
    row = bound_rows([s], game="substitute", history=history, delta=DELTA, alpha=0.05, procedures=["mahloujifar"],
                     family="dpsgd")[0]
    assert row["perfect"] == dpsgd == row["epsilon"]
    assert "DP-SGD" in FDP_FAMILIES["dpsgd"].label and claim_prefix("dpsgd").startswith("if DP-SGD")
    assert claim_prefix("dp") == "epsilon >="
    # white_box_families: the white-box set's f-DP bound under both curves, each with its own cap;
    # the input set's and Steinke's under the (eps, delta) curve only
    inputs = ScoreSet("random", "loss", s.scores, bits, False)
    rows = bound_rows([inputs, s], game="substitute", history=history, delta=DELTA, alpha=0.05,
                      white_box_families=["dpsgd"])
    got = {(r["canaries"], r["procedure"], r["family"]): r for r in rows}
    assert set(got) == {("random", "steinke", "dp"), ("random", "mahloujifar", "dp"),
                        ("gradient", "steinke", "dp"), ("gradient", "mahloujifar", "dp"),
                        ("gradient", "mahloujifar", "dpsgd")}
    assert got[("gradient", "mahloujifar", "dpsgd")]["perfect"] == dpsgd
    assert got[("gradient", "mahloujifar", "dp")]["perfect"] == perfect_epsilon("mahloujifar", 1000, DELTA) < dpsgd


def kary_randomised_response(rng, audits, m, k, eps=1.0, delta=0.0):
    """k-ary substitute slots answered by k-ary randomised response at eps (the true value with
    probability e^eps / (e^eps + k - 1), else another uniformly), revealed outright with
    probability delta: value scores (audits, m, k), one-hot (10 where revealed), and the values."""
    values = rng.integers(0, k, (audits, m))
    keep = rng.random((audits, m)) < math.exp(eps) / (math.exp(eps) + k - 1)
    said = np.where(keep, values, (values + rng.integers(1, k, (audits, m))) % k)
    reveal = rng.random((audits, m)) < delta
    said = np.where(reveal, values, said)
    scores = np.eye(k)[said] * np.where(reveal, 10.0, 1.0)[..., None]
    return scores, values


@pytest.mark.parametrize(("k", "delta"), [(4, DELTA), (16, DELTA), (16, 0.02)])
def test_kary_slots_are_valid_where_randomised_response_is_sharp(k, delta):
    """k-ary substitute slots (the white-box k-ary gradient canaries' game) through the library's
    own procedure: k-ary randomised response is exactly eps-DP with the sharp curve, and with a
    delta of reveals (eps, delta)-DP and no better; its bound exceeds eps in at most the nominal
    5% of 1,000 audits of m = 500 slots. Uncorrected for the guess-count search it exceeds far
    more often (the check has power); Steinke et al.'s bound refuses k-ary slots."""
    rng = np.random.default_rng(k)
    scores, values = kary_randomised_response(rng, AUDITS, 500, k, delta=0 if delta == DELTA else delta)
    over = [procedure_falsifies("mahloujifar", s, v, 1.0, delta, game="substitute") for s, v in zip(scores, values)]
    assert sum(over) <= ALLOWED, sum(over)
    if delta == DELTA:
        loose = [procedure_falsifies("mahloujifar", s, v, 1.0, delta, game="substitute", bonferroni=False)
                 for s, v in zip(scores, values)]
        assert sum(loose) > ALLOWED
    bound = procedure_epsilon("mahloujifar", scores[0], values[0], DELTA, game="substitute")
    assert 0 < bound < perfect_epsilon("mahloujifar", 500, DELTA, k=k)
    with pytest.raises(ParameterError, match="pair scores for steinke"):
        procedure_epsilon("steinke", scores[0], values[0], DELTA, game="substitute")
    with pytest.raises(ParameterError, match="membership"):
        procedure_epsilon("mahloujifar", scores[0], values[0], DELTA, game="membership")
