"""The cost models of the workflow's computing jobs (subaudit.pipeline.costs): training, the
non-private reference, features, crafting, S1 simulations and accounting."""

from __future__ import annotations

import pytest

from subaudit.job_requests import OUTPUT_FIXED_KB, RUNTIME_FIXED_MIN, RUNTIME_MARGIN
from subaudit.pipeline import costs
from subaudit.pipeline.costs import model_parameters, model_step_seconds, training_job_resources
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


def test_every_model_is_its_seconds_with_the_margin():
    """Each job's runtime is RUNTIME_MARGIN x its modelled seconds + RUNTIME_FIXED_MIN, rounded up,
    and expected_s those seconds: checked on each model's own formula, written out here."""
    from subaudit.data.backbones import BACKBONES

    def holds(request, seconds, mem_mb, out_bytes):
        assert request == {"runtime": RUNTIME_FIXED_MIN + -(-RUNTIME_MARGIN * seconds // 60),
                           "mem_mb": -(-mem_mb // 1), "expected_s": -(-seconds // 1),
                           "out_kb": OUTPUT_FIXED_KB + -(-out_bytes // 1024)}

    vit = BACKBONES["vit-b16-in21k"]
    holds(costs.features_job_resources("vit-b16-in21k", 15_500, 224, "cpu", 3072),
          15_500 * vit.macs / vit.cpu_macs_per_s,
          2000 + 4 * (2 * (vit.parameters + 15_500 * (768 + 3072)) + 64 * 16 * 3 * 224**2) / 2**20,
          4 * 15_500 * 768)
    eff = BACKBONES["efficientnet-lite0"]
    assert costs.features_job_resources("efficientnet-lite0", 1000, 112, "cpu", 784)["expected_s"] == \
        -(-1000 * eff.macs / 4 / eff.cpu_macs_per_s // 1)       # a quarter of the pixels at 112 px
    holds(costs.simulate_s1_job_resources(15, 25_000, [250, 500], 0.25), 15 * 50_000 * 750 * 5e-8,
          2000 + 8 * 50_000 * (15 * 2 + 4) / 2**20, 15 * 50_000 * (2 * 8 + 9))
    holds(costs.simulate_s1_job_resources(15, 25_000, [250, 500], 1.0), 15 * 50_000 * 2 * 5e-8,   # closed form
          2000 + 8 * 50_000 * (15 * 2 + 4) / 2**20, 15 * 50_000 * (2 * 8 + 9))
    holds(costs.accounting_job_resources(0.25, 500, 1, 40), 0.002 * 500**0.5 * 4 ** (1 / 3) * (15 + 40), 2000, 0)
    holds(costs.accounting_job_resources(1.0, 2500, 5, 0), 0.002 * 50 * 5 * 15, 2000, 0)   # no subsampling
    holds(costs.reference_job_resources((600, 128, 100), 50_000, 0.25, 2500, 110_000 * 600),
          2500 * model_step_seconds((600, 128, 100), 12_501, "cpu"), 2000 + 2 * 4 * 110_000 * 600 / 2**20,
          4 * model_parameters((600, 128, 100)))
    holds(costs.craft_job_resources((1e5, 2**30), (256, 128, 26), 500, 1500 * 256),
          1e5 * model_step_seconds((256, 128, 26), 501, "cpu"), 2000 + 1024 + 2 * 4 * 1500 * 256 / 2**20, 8 * 256)
    holds(training_job_resources((768, 10), 500, 0.25, 1000, 100, "cpu", 2048, 11),
          1000 * 100 * model_step_seconds((768, 10), 126, "cpu"), 2048 + 2000, 1000 * (11 * 8 + 9))
    with pytest.raises(ParameterError, match="device"):
        costs.features_job_resources("vit-b16-in21k", 10, 224, "tpu", 3072)


def test_the_papers_features_on_a_cpu_need_more_than_the_old_fixed_request():
    """ViT-B/16 over the paper's CIFAR-10 split (15,500 images at 224 px) on one CPU thread takes
    about 77 minutes at the measured rate: the fixed 120 minutes every features job asked for
    would have killed it on a machine half as fast; on a GPU it asks for minutes."""
    cpu = costs.features_job_resources("vit-b16-in21k", 15_500, 224, "cpu", 3072)
    gpu = costs.features_job_resources("vit-b16-in21k", 15_500, 224, "cuda", 3072)
    assert 70 * 60 < cpu["expected_s"] < 85 * 60 and cpu["runtime"] > 2 * 120 and gpu["runtime"] < 30


@pytest.mark.parametrize("name", ["efficientnet-lite0", "vit-b16-in21k", "minilm-l6-v2"])
def test_a_backbones_cost_is_its_forward(name):
    """A backbone's multiply-accumulates per record are torch's FLOP count of its forward halved
    (an image at 224 px, a sentence of 32 tokens), within 1%, and its parameters the built
    model's (random weights: nothing downloaded)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from subaudit.data import features
    from subaudit.data.backbones import BACKBONES, COST_RESOLUTION, COST_TOKENS

    bb = BACKBONES[name]
    if bb.family == "image":
        model = features.create_image_model(name, pretrained=False)
        inputs = (torch.rand(1, 3, COST_RESOLUTION, COST_RESOLUTION),)
    else:
        model = features.load_text_backbone(name, "cpu")
        tokens = model.tokenize(["word " * (COST_TOKENS - 2)])
        inputs = ({k: v for k, v in tokens.items() if isinstance(v, torch.Tensor)},)
        assert inputs[0]["input_ids"].shape[1] == COST_TOKENS
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(*inputs)
    assert bb.macs == pytest.approx(counter.get_total_flops() / 2, rel=0.01)
    assert bb.parameters == sum(p.numel() for p in model.parameters())


def test_s6_crafting_work_is_what_it_trains():
    """S6's crafting work: metasteps x METASTEP_MODEL_STEPS x runs x T model-steps, then two pairs
    on fresh check runs per world; its graph every step's activations of every record per run.
    The linearised objective trains one trajectory. At the paper's Purchase100 size (50,000
    records, T = 2,500) the unrolled graph would need terabytes: the plan says so before any job."""
    from subaudit.scenarios import SCENARIOS
    from subaudit.scenarios.s6 import METASTEP_MODEL_STEPS

    work = SCENARIOS["S6"].crafting_work
    o = {"s6_runs": 32, "s6_check_runs": 64, "s6_metasteps": 5, "s6_objective": "unrolled"}
    steps, graph = work(o, 100, 500, (256, 128, 26))
    assert steps == 5 * METASTEP_MODEL_STEPS * 32 * 100 + 4 * 64 * 100
    assert graph == 4 * 100 * 32 * (500 * (128 + 26) + model_parameters((256, 128, 26)))
    lin_steps, lin_graph = work({**o, "s6_objective": "linearised"}, 100, 500, (256, 128, 26))
    assert lin_steps == 100 + 4 * 64 * 100 and lin_graph < graph / 50
    assert all(s.crafting_work is None for n, s in SCENARIOS.items() if n != "S6")   # seconds each
    paper = costs.craft_job_resources(work(o, 2500, 50_000, (600, 128, 100)), (600, 128, 100), 50_000,
                                         110_000 * 600)
    assert paper["mem_mb"] > 2**20 and paper["runtime"] > 24 * 60


@pytest.mark.parametrize("n, d, optimizer, trap", [(500, 1280, "sgd", False), (1000, 1280, "sgd", False),
                                                   (500, 1280, "adam", False), (500, 1280, "sgd", True),
                                                   (300, 384, "sgd", False)])
def test_the_trained_parameters_are_the_engines_basis(n, d, optimizer, trap):
    """costs.trained_parameters (read while Snakemake parses, without torch) counts what the
    engine's choice of basis trains (subaudit.engine.span.choose_basis, 'auto'): a linear head
    by SGD in the span of its records and an input canary, scored by its logit difference,
    where that has at most SPAN_BELOW of its inputs; with Adam, a trap canary (S7) or a span too
    large, every parameter."""
    import torch

    from subaudit.engine import MLP, DPConfig, InputCanary, Records
    from subaudit.engine.span import SPAN_BELOW, choose_basis

    assert costs.SPAN_BELOW == SPAN_BELOW
    g = torch.Generator().manual_seed(0)
    model, k = MLP((d, 10)), 10
    data = Records(torch.randn(n, d, generator=g), torch.randint(0, k, (n,), generator=g))
    canary = InputCanary(torch.randn(2, d, generator=g), torch.tensor([1, 2]),
                         trap=((0, torch.tensor([0]), torch.tensor([0.5])),) if trap else ())
    dp = DPConfig(steps=10, sampling_rate=1.0, noise_multiplier=1.0, clip=1.0, lr=0.1, optimizer=optimizer)
    basis = choose_basis("auto", model, data, canary, dp)
    modelled = costs.trained_parameters((d, k), n, optimizer, span=not trap)
    if basis is None:
        assert modelled == model.num_params
    else:
        assert basis.shape[1] <= n + costs.SPAN_EXTRA_ROWS
        assert modelled == (n + costs.SPAN_EXTRA_ROWS + 1) * k
