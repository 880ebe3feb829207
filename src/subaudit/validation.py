"""Domain checks shared by the library, the CLI and the workflow.

Every check raises :class:`ParameterError`, which names the parameter, the value
and the allowed range, so that a caller (CLI flag, params.yaml key) can re-label it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any


class ParameterError(ValueError):
    """A parameter outside its domain."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        self.name = name
        self.value = value
        self.allowed = allowed
        super().__init__(f"{name} = {value!r} is invalid; allowed: {allowed}")


class ConfigError(ValueError):
    """A params file (params.yaml, a --configfile preset) that cannot be read or breaks the schema
    (:mod:`subaudit.pipeline.config`), named with the key or the file."""


class AccountingRangeError(ValueError):
    """The requested epsilon/delta lies beyond what the numerics resolve reliably (raised by
    :mod:`subaudit.accounting`; defined here, with the other errors, so that the command line
    can name it without loading the accountants)."""


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


#: The smallest noise multiplier the Gaussian computations resolve: below it sigma^2 underflows
#: double precision (to 0 or a subnormal), and the privacy loss and scores become NaN or a
#: division by zero (the exact answer: the two worlds are told apart without error).
SIGMA_MIN = 1e-150


def check_noise_multiplier(value: Any, name: str = "sigma") -> float:
    """A noise multiplier: finite, > 0 and at least :data:`SIGMA_MIN`."""
    sigma = check_positive(value, name)
    if sigma < SIGMA_MIN:
        raise ParameterError(name, value, f"a noise multiplier >= {SIGMA_MIN:g} (below, sigma^2 underflows "
                                          "double precision)")
    return sigma


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


def available_memory() -> int | None:
    """Bytes of memory this machine can still give a process (Linux' MemAvailable; the
    physical memory elsewhere), or None where neither is known."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_memory(value: Any, name: str, needed: float, available: int | None = None) -> None:
    """ParameterError naming ``name`` when what ``value`` asks for needs more than the memory
    available (``available``, default :func:`available_memory`): refused before it is allocated,
    with the size it would need, instead of a MemoryError (or the kernel's OOM killer) later."""
    available = available_memory() if available is None else available
    if available is not None and needed > available:
        raise ParameterError(name, value, f"a size that fits in memory: this one needs about {_size(needed)}, "
                                          f"and {_size(available)} is available")
