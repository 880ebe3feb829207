"""The cost model's per-unit costs measured where jobs run (subaudit.pipeline.unit_costs): each
measurement's modelled seconds are the cost model's own formula for the same work, written out
here; the measured seconds are this machine's (the rehearsal compares them with the model:
tests/workflow/test_rehearsal.py)."""

from __future__ import annotations

import math
import time

import pytest

from subaudit.pipeline import costs, unit_costs
from subaudit.pipeline.unit_costs import AGREEMENT, UnitCost


def test_a_ratio_is_measured_over_modelled_and_the_table_shows_it():
    slow = UnitCost("ENGINE_COSTS", "a head", 0.5, 2.0)
    assert slow.ratio == 4.0 and not AGREEMENT[0] <= slow.ratio <= AGREEMENT[1]
    assert slow.to_dict() == {"unit": "ENGINE_COSTS", "setting": "a head", "modelled_s": 0.5, "measured_s": 2.0,
                              "device": "cpu", "ratio": 4.0}
    row = unit_costs.table([slow]).splitlines()[1].split()
    assert row[0] == "ENGINE_COSTS" and row[-3:] == ["0.500", "2.000", "4.00"]


def test_a_networks_modelled_seconds_are_its_measured_rate_scaled_by_the_input():
    """At the reference input a batch takes batch / rate; a grey 28x28 image of a network
    measured on 32x32x3 ones is 784 / 3,072 of the work."""
    wrn = costs.NETWORK_COSTS["wrn-16-4"]
    at_reference = unit_costs.network("wrn-16-4", (32, 32, 3), 32, examples_per_s=wrn.rate["cpu"])
    assert at_reference.modelled_s == pytest.approx(32 / 16.2) and at_reference.ratio == pytest.approx(1.0)
    grey = unit_costs.network("wrn-16-4", (28, 28), 32, examples_per_s=8.0)
    assert grey.modelled_s == pytest.approx(32 / (16.2 * 3072 / 784)) and grey.measured_s == 4.0
    gpu = unit_costs.network("wrn-16-4", (32, 32, 3), 1024, examples_per_s=8843.0, device="cuda")
    assert gpu.ratio == pytest.approx(1.0) and gpu.device == "cuda"


def test_the_engines_modelled_seconds_are_its_model_steps():
    """runs x steps model-steps of the expected batch q n + 1 (the canary) over the parameters
    a linear head spans (505 x 10 for 500 records of 1,280 inputs), at 100 us a layer-step and
    100 ps an example-parameter."""
    u = unit_costs.engine((1280, 10), 500, 0.25, "sgd", runs=8, steps=2)
    assert u.modelled_s == pytest.approx(8 * 2 * (100e-6 + 100e-12 * 126 * 505 * 10))
    assert u.measured_s > 0 and u.setting == "1280-10 q=0.25 sgd, 8 runs x 2 steps"


def test_the_accountants_and_s1s_modelled_seconds():
    ev = unit_costs.accountant(0.0625, 100, sigma=1.0)
    assert ev.modelled_s == pytest.approx(0.002 * 10 * 0.0625 ** (-1 / 3)) and ev.measured_s > 0
    sim = unit_costs.s1(0.25, 50, 100)
    assert sim.modelled_s == pytest.approx(5e-8 * 200 * 50) and sim.measured_s > 0


def test_a_proxys_modelled_seconds_are_its_metasteps_multiply_accumulates():
    from subaudit.scenarios.canary_optimisation import PROXY_NETWORKS

    u = unit_costs.proxy("cnn", (1, 28, 28), 4, 8, 2)
    net = PROXY_NETWORKS["cnn"]
    assert u.modelled_s == pytest.approx(2 * 8 * net.macs((1, 28, 28), 4) / 4.6e8)
    assert math.isfinite(u.measured_s) and u.measured_s > 0


def test_the_cpus_units_are_measured_in_cpu_time_and_a_gpus_in_wall_time():
    """A node's other work does not count against a unit on the CPU: a call that waits (as a
    process waits for a core on a busy node) costs it no CPU time; on a GPU the wall time counts."""
    assert unit_costs.clock("cpu") is time.process_time and unit_costs.clock("cuda:1") is time.perf_counter
    assert unit_costs._best(lambda: time.sleep(0.05)) < 0.025       # half the wait: a wall clock fails
    cpu = unit_costs.clock("cpu")
    start = cpu()
    time.sleep(0.05)
    assert cpu() - start < 0.025
    wall = unit_costs.clock("cuda")
    start = wall()
    time.sleep(0.05)
    assert wall() - start >= 0.05
