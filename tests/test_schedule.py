"""Score checkpoints: every ``every`` steps and the last, nothing else."""

from __future__ import annotations

import pytest

from subaudit.schedule import checkpoints
from subaudit.validation import ParameterError


@pytest.mark.parametrize("steps,every,expected", [
    (10, 3, [3, 6, 9, 10]), (10, 5, [5, 10]), (3, 5, [3]), (1, 1, [1]),
    (500, 100, [100, 200, 300, 400, 500]),
])
def test_checkpoints(steps, every, expected):
    assert checkpoints(steps, every).tolist() == expected


def test_checkpoints_match_a_plain_loop():
    for steps in range(1, 40):
        for every in range(1, 45):
            loop = [t for t in range(1, steps + 1) if t % every == 0 or t == steps]
            assert checkpoints(steps, every).tolist() == loop


def test_bad_every_names_the_key():
    with pytest.raises(ParameterError, match="score_every"):
        checkpoints(10, 0)
