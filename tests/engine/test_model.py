"""The engine's model (subaudit.engine.model): the flat parameters' layout."""

from __future__ import annotations

import torch

from subaudit.engine import MLP, RunStreams, init_params


def test_offsets_split_flat_params():
    """MLP.offsets cut the flat (R, P) parameters back into each tensor, in order."""
    from subaudit.engine import flat_params

    model = MLP((7, 5, 3))
    params = init_params(model, RunStreams.for_runs(3, range(2)), "random", torch.float64)
    flat, offsets = flat_params(params), model.offsets
    assert offsets.tolist() == [0, 35, 40, 55, 58] and offsets[-1] == model.num_params
    for p, lo, hi in zip(params, offsets[:-1], offsets[1:]):
        assert torch.equal(flat[:, lo:hi].reshape(p.shape), p)
