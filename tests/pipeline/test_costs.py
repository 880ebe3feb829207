"""The engine's cost model (subaudit.pipeline.costs): the requests of the training jobs."""

from __future__ import annotations

import pytest

from subaudit.pipeline.costs import (RUNTIME_FIXED_MIN, RUNTIME_MARGIN, model_parameters, model_step_seconds,
                                  training_job_resources)
from subaudit.validation import ParameterError


def test_parameters_of_dense_networks():
    """As counted by hand and by the engine's own model (which imports torch, so the workflow
    cannot read it while it parses)."""
    from subaudit.engine import MLP

    assert model_parameters((768, 10)) == 768 * 10 + 10
    assert model_parameters((600, 128, 100)) == 600 * 128 + 128 + 128 * 100 + 100
    for sizes in ((768, 10), (600, 128, 100), (256, 128, 26), (1280, 10)):
        assert model_parameters(sizes) == MLP(sizes).num_params


def test_a_request_is_the_modelled_time_with_its_margin():
    """The runtime grows with runs x steps, a GPU's is lower than a CPU's, the memory is the
    engine's budget and the process's; auto is costed as the GPU it asks for."""
    one = training_job_resources((768, 10), 500, 1.0, 1000, 500, "cpu", 2048)
    seconds = 1000 * 500 * model_step_seconds((768, 10), 501, "cpu")
    assert one["runtime"] == RUNTIME_FIXED_MIN + -(-RUNTIME_MARGIN * seconds // 60)
    assert one["expected_s"] == -(-seconds // 1)                # the modelled seconds, no margin
    two = training_job_resources((768, 10), 500, 1.0, 2000, 500, "cpu", 2048)
    assert two["runtime"] - RUNTIME_FIXED_MIN == pytest.approx(2 * (one["runtime"] - RUNTIME_FIXED_MIN), abs=1)
    gpu = training_job_resources((768, 10), 500, 1.0, 1000, 500, "cuda", 2048)
    assert gpu["runtime"] < one["runtime"] and gpu == training_job_resources((768, 10), 500, 1.0, 1000, 500,
                                                                             "auto", 2048)
    assert one["mem_mb"] == 2048 + 2000
    with pytest.raises(ParameterError, match="device"):
        training_job_resources((768, 10), 500, 1.0, 1000, 500, "tpu", 2048)


def test_the_paper_presets_tabular_shard_needs_more_than_the_old_fixed_request_on_a_cpu():
    """A shard of the paper's Purchase100 audit (500 runs x 2,500 steps of the 600-128-100 MLP at
    q = 0.25 of 50,000 records) would have been killed at the fixed 240 minutes training jobs
    asked for on a CPU; on a GPU it asks for about an hour."""
    cpu = training_job_resources((600, 128, 100), 50_000, 0.25, 500, 2500, "cpu", 8192)
    gpu = training_job_resources((600, 128, 100), 50_000, 0.25, 500, 2500, "cuda", 8192)
    assert cpu["runtime"] > 5 * 240 and gpu["runtime"] < 120
