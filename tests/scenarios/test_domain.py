"""Where a crafted record may live: the domain of each kind of data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from subaudit.scenarios.domain import Domain

F64 = torch.float64


def test_domain_of_each_kind_of_data():
    box = Domain.of(torch.tensor([[0.0, -1.0], [2.0, 3.0]]))
    assert box.kind == "box" and box.lo.tolist() == [0.0, -1.0] and box.hi.tolist() == [2.0, 3.0]
    u = box.free(torch.tensor([1.0, 1.0]))
    assert torch.allclose(box.value(u), torch.tensor([1.0, 1.0], dtype=F64))
    u.data += 10.0
    box.project(u)
    assert box.value(u).tolist() == [2.0, 3.0]                # clamped to the range
    # one-hot attributes of 4 values, the last value of the first never observed
    codes = np.array([[0, 3], [1, 2], [2, 0], [0, 1]])
    x = torch.from_numpy(np.concatenate([np.eye(4)[codes[:, 0]], np.eye(4)[codes[:, 1]]], 1))
    dom = Domain.of(x)
    assert dom.kind == "one-hot" and dom.groups == ((0, 4), (4, 8))
    relaxed = dom.value(dom.free(x[0]))
    assert [float(relaxed[lo:hi].sum()) for lo, hi in dom.groups] == pytest.approx([1.0, 1.0])
    assert torch.equal(dom.round(relaxed), x[0].double())      # rounds back to the record
    binary = Domain.of(torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    assert binary.kind == "binary"
    assert binary.round(binary.value(binary.free(torch.tensor([1.0, 0.0, 1.0])))).tolist() == [1, 0, 1]


def test_packaged_tabular_records_are_one_hot_attributes(tmp_path):
    from subaudit import data

    ds = data.load("letter", data.acquire("letter", tmp_path))   # some values never observed
    dom = Domain.of(torch.from_numpy(ds.x[:2000]))
    assert dom.kind == "one-hot" and len(dom.groups) == 16 and all(hi - lo == 16 for lo, hi in dom.groups)
