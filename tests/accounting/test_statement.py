"""The privacy statement: every field against an independent computation."""

from __future__ import annotations

import math

import pytest
from pld_reference import pld_history_epsilon

from subaudit.accounting.statement import ASSUMPTIONS, privacy_statement


@pytest.fixture(scope="module")
def statement():
    return privacy_statement([(1.0, 0.01, 1000)], 1e-5)


def test_epsilons_match_dp_accounting(statement):
    history = [(1.0, 0.01, 1000)]
    assert statement.add_remove.epsilon == pytest.approx(
        pld_history_epsilon(history, 1e-5, "add-remove"), rel=0.01)
    assert statement.substitute.epsilon == pytest.approx(
        pld_history_epsilon(history, 1e-5, "substitute"), rel=0.01)
    g = statement.group
    assert (1 + math.exp(g.epsilon_add_remove)) * g.delta_add_remove == pytest.approx(1e-5, rel=1e-6)
    assert g.epsilon == pytest.approx(2 * pld_history_epsilon(history, g.delta_add_remove, "add-remove"),
                                      rel=0.01)


def test_fields_and_sentence(statement):
    d = statement.to_dict()
    assert (d["sigma"], d["q"], d["steps"], d["delta"]) == (1.0, 0.01, 1000, 1e-5)
    assert d["segments"] == [[1.0, 0.01, 1000]]
    assert d["epsilon_add_remove"] == statement.add_remove.epsilon
    assert d["epsilon_substitute"] == statement.substitute.epsilon
    assert d["epsilon_group"] == statement.group.epsilon
    assert d["group_delta_prime"] == statement.group.delta_add_remove
    assert d["group_epsilon_add_remove"] == statement.group.epsilon_add_remove
    assert d["group_error"] is None
    assert d["ratio_substitute_to_add_remove"] == pytest.approx(
        d["epsilon_substitute"] / d["epsilon_add_remove"], rel=1e-12)
    # the paper's observations: substitute above add/remove, below twice it and below group
    assert 1 < d["ratio_substitute_to_add_remove"] < 2 and d["epsilon_substitute"] < d["epsilon_group"]
    for name, b in d["bounds"].items():
        assert b["lower"] <= b["estimate"] <= b["upper"], name
        assert b["upper"] - b["lower"] <= 2 * b["eps_error"] * (2 if name == "group" else 1) + 1e-3
    assert d["bounds"]["substitute"]["upper"] == d["epsilon_substitute"]
    assert d["assumptions"] == list(ASSUMPTIONS)
    assert any("Poisson" in a for a in ASSUMPTIONS) and any("2C" in a for a in ASSUMPTIONS)
    text = d["statement"]
    for value in (statement.add_remove.epsilon, statement.substitute.epsilon, statement.group.epsilon,
                  statement.ratio):
        assert f"{value:.3g}" in text
    assert "1e-05" in text and "q = 0.01" in text and "1000 steps" in text


def test_group_out_of_range_is_reported_not_raised():
    # eps_AR of about 27 here: group privacy needs delta' ~ 1e-17, beyond the accountant
    st = privacy_statement([(2.0, 1.0, 50), (1.2, 0.25, 100), (3.0, 0.0625, 400)], 1e-5)
    assert st.group is None and "delta" in st.group_error
    d = st.to_dict()
    assert d["epsilon_group"] is None and d["bounds"]["group"] is None
    assert d["sigma"] is None and d["steps"] == 550 and len(d["segments"]) == 3
    assert "Group privacy" not in d["statement"] and "3 stretches" in d["statement"]
