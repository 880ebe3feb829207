"""subaudit's accountants inside Opacus: real trainings, checked against the CLI,
dp-accounting's PLD accountant and Opacus' own PRV accountant."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import cli_json
from opacus import PrivacyEngine
from opacus.accountants import create_accountant
from opacus.accountants.utils import get_noise_multiplier
from pld_reference import pld_history_epsilon
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import subaudit.opacus as sub_opacus
from subaudit.accounting import epsilon_of_history

DELTA = 1e-5


def digits_loader(batch_size: int = 64) -> DataLoader:
    """scikit-learn's packaged 8x8 digits (1,797 images), pixels scaled to [0, 1]."""
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32)
    return DataLoader(TensorDataset(x, torch.tensor(d.target)), batch_size=batch_size)


def private(accountant: str, noise: float = 1.0, **kwargs):
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 10)
    engine = PrivacyEngine(accountant=accountant)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=digits_loader(),
                                             noise_multiplier=noise, max_grad_norm=1.0, **kwargs)
    return engine, model, opt, loader


def train(model, opt, loader, steps: int) -> None:
    done = 0
    while done < steps:
        for xb, yb in loader:
            opt.zero_grad()
            if len(xb):
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            done += 1
            if done == steps:
                return


def test_registered_under_opacus_names():
    assert isinstance(create_accountant("substitute"), sub_opacus.SubstituteAccountant)
    assert isinstance(create_accountant("add-remove"), sub_opacus.AddRemoveAccountant)
    sub_opacus.register()  # again: harmless
    assert create_accountant("substitute").mechanism() == "substitute"


def test_real_training_epsilon_matches_cli_and_dp_accounting():
    engine, model, opt, loader = private("substitute", noise=1.1)
    train(model, opt, loader, 12)
    acc = engine.accountant
    (sigma, q, steps), = acc.history
    assert (sigma, steps) == (1.1, 12) and q == pytest.approx(1 / 29)
    assert len(acc) == 1 and acc.steps == 12
    eps = engine.get_epsilon(DELTA)
    cli = cli_json("account", "--sigma", repr(sigma), "--q", repr(q), "--steps", str(steps),
                   "--delta", str(DELTA), "--adjacency", "substitute")
    assert eps == cli["epsilon"]
    assert eps == pytest.approx(pld_history_epsilon(acc.history, DELTA, "substitute"), rel=0.01)
    # above the add/remove epsilon of the same training, as the paper says
    assert eps > epsilon_of_history(acc.history, DELTA, "add-remove").epsilon


def test_changing_noise_mid_training_composes_the_segments():
    engine, model, opt, loader = private("substitute", noise=1.0)
    train(model, opt, loader, 10)
    opt.noise_multiplier = 2.0
    train(model, opt, loader, 15)
    hist = engine.accountant.history
    assert [(s, t) for s, _, t in hist] == [(1.0, 10), (2.0, 15)]
    eps = engine.get_epsilon(DELTA)
    assert eps == pytest.approx(pld_history_epsilon(hist, DELTA, "substitute"), rel=0.01)
    cli = cli_json("account", "--sigma", "1.0", "2.0", "--q", repr(hist[0][1]), "--steps", "10", "15",
                   "--delta", str(DELTA), "--adjacency", "replace-one")
    assert cli["epsilon"] == eps and cli["segments"] == [list(s) for s in hist]


def test_make_private_with_epsilon_reaches_the_target():
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 10)
    engine = PrivacyEngine(accountant="substitute")
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model, opt, loader = engine.make_private_with_epsilon(
        module=model, optimizer=opt, data_loader=digits_loader(), target_epsilon=8.0,
        target_delta=DELTA, epochs=2, max_grad_norm=1.0)
    train(model, opt, loader, 2 * len(loader))
    eps = engine.get_epsilon(DELTA)
    assert 8.0 - 0.01 <= eps <= 8.0  # Opacus' epsilon_tolerance, from below
    # Opacus' own calibration through the accountant gives the same sigma
    sigma = get_noise_multiplier(target_epsilon=8.0, target_delta=DELTA, sample_rate=1 / len(loader),
                                 steps=2 * len(loader), accountant="substitute")
    assert opt.noise_multiplier == sigma
    # the add/remove calibration of the same target needs less noise
    assert get_noise_multiplier(target_epsilon=8.0, target_delta=DELTA, sample_rate=1 / len(loader),
                                steps=2 * len(loader), accountant="add-remove") < sigma


def test_state_dict_round_trip(tmp_path):
    engine, model, opt, loader = private("substitute", noise=1.3)
    train(model, opt, loader, 7)
    state = engine.accountant.state_dict()
    assert set(state) == {"history", "mechanism"} and state["mechanism"] == "substitute"
    fresh = sub_opacus.SubstituteAccountant()
    fresh.load_state_dict(state)
    assert fresh.history == engine.accountant.history
    assert fresh.get_epsilon(DELTA) == engine.get_epsilon(DELTA)
    # through Opacus' checkpoints
    path = tmp_path / "ckpt.pt"
    engine.save_checkpoint(path=path, module=model, optimizer=opt)
    engine2, model2, opt2, _ = private("substitute", noise=1.3)
    engine2.load_checkpoint(path=path, module=model2, optimizer=opt2)
    assert engine2.accountant.history == engine.accountant.history
    with pytest.raises(ValueError, match="substitute"):
        create_accountant("prv").load_state_dict(state)


def test_add_remove_accountant_agrees_with_opacus_prv():
    engine, model, opt, loader = private("add-remove", noise=1.0)
    train(model, opt, loader, 20)
    ours = engine.get_epsilon(DELTA)
    prv = create_accountant("prv")
    prv.history = list(engine.accountant.history)
    assert ours == pytest.approx(prv.get_epsilon(DELTA), rel=0.01)
    assert ours == pytest.approx(pld_history_epsilon(prv.history, DELTA, "add-remove"), rel=0.01)


def test_empty_history_is_zero():
    assert sub_opacus.SubstituteAccountant().get_epsilon(DELTA) == 0.0


def test_warns_when_the_loader_is_not_poisson():
    with pytest.warns(sub_opacus.NotPoissonWarning, match="Poisson"):
        private("substitute", poisson_sampling=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sub_opacus.NotPoissonWarning)
        _, _, _, loader = private("substitute")
    assert sub_opacus.is_poisson(loader) and not sub_opacus.is_poisson(digits_loader())


def test_statement_of_the_training():
    engine, model, opt, loader = private("substitute", noise=1.1)
    train(model, opt, loader, 5)
    st = engine.accountant.statement(DELTA)
    assert st.substitute.epsilon == engine.get_epsilon(DELTA)
    assert st.add_remove.epsilon < st.substitute.epsilon < st.group.epsilon
