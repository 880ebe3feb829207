"""The shared domain checks (subaudit.validation) that no other module's tests pin down:
the memory guard and the noise multiplier's floor."""

from __future__ import annotations

import pytest

from subaudit.validation import SIGMA_MIN, ParameterError, available_memory, check_memory, check_noise_multiplier


def test_the_memory_guard_names_the_size_needed_and_available():
    check_memory(5, "runs", needed=2**30, available=2**31)            # fits: nothing said
    with pytest.raises(ParameterError) as info:
        check_memory(10**13, "runs", needed=3 * 2**40, available=23 * 2**30)
    assert info.value.name == "runs" and info.value.value == 10**13
    assert "needs about 3 TiB, and 23 GiB is available" in str(info.value)


def test_available_memory_is_what_the_system_reports():
    """Against psutil (an independent reading of the same kernel counter), a few MiB apart."""
    import psutil

    assert available_memory() == pytest.approx(psutil.virtual_memory().available, abs=256 * 2**20)


def test_the_noise_multipliers_floor():
    assert check_noise_multiplier(SIGMA_MIN) == SIGMA_MIN and check_noise_multiplier(0.5) == 0.5
    for bad in (SIGMA_MIN / 2, 0.0, -1.0, float("nan")):
        with pytest.raises(ParameterError, match="sigma"):
            check_noise_multiplier(bad)
    assert (SIGMA_MIN * SIGMA_MIN) > 2.2250738585072014e-308   # its square is a normal double
