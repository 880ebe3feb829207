"""Domain checks shared by the library, the CLI and the workflow.

Every check raises :class:`ParameterError`, which names the parameter, the value
and the allowed range, so that a caller (CLI flag, params.yaml key) can re-label it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


class ParameterError(ValueError):
    """A parameter outside its domain."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        self.name = name
        self.value = value
        self.allowed = allowed
        super().__init__(f"{name} = {value!r} is invalid; allowed: {allowed}")


class Diverged(ArithmeticError):
    """A training whose parameters or scores became NaN or infinite: its result is not written."""

    def __init__(self, what: str, setting: str, hint: str) -> None:
        self.what = what
        self.setting = setting
        super().__init__(f"{what} became NaN or infinite: the training of {setting} diverged; {hint}. "
                         "Nothing was written.")


def _finite(name: str, value: Any, allowed: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, allowed) from None
    if not math.isfinite(x):
        raise ParameterError(name, value, allowed)
    return x


def check_sampling_rate(value: Any, name: str = "q") -> float:
    """Poisson sampling rate q in (0, 1]."""
    x = _finite(name, value, "a number in (0, 1]")
    if not 0.0 < x <= 1.0:
        raise ParameterError(name, value, "a number in (0, 1]")
    return x


def check_positive(value: Any, name: str) -> float:
    """A finite number > 0 (noise multiplier, clip norm, target epsilon, mu...)."""
    x = _finite(name, value, "a finite number > 0")
    if x <= 0.0:
        raise ParameterError(name, value, "a finite number > 0")
    return x


def check_probability(value: Any, name: str) -> float:
    """A probability in the open interval (0, 1) (delta, alpha)."""
    x = _finite(name, value, "a number in (0, 1)")
    if not 0.0 < x < 1.0:
        raise ParameterError(name, value, "a number in (0, 1)")
    return x


def check_count(value: Any, name: str, minimum: int = 1) -> int:
    """An integer >= minimum (steps, runs, repeats)."""
    allowed = f"an integer >= {minimum}"
    if isinstance(value, bool):
        raise ParameterError(name, value, allowed)
    try:
        x = int(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, allowed) from None
    if x != value and not (isinstance(value, float) and value.is_integer()):
        raise ParameterError(name, value, allowed)
    if x < minimum:
        raise ParameterError(name, value, allowed)
    return x


def check_choice(value: Any, name: str, choices: Iterable[str]) -> str:
    """One of a fixed set of names (adjacency, estimator, scenario)."""
    options = tuple(choices)
    if value not in options:
        raise ParameterError(name, value, "one of " + ", ".join(options))
    return str(value)
