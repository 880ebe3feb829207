"""Deep-network audits (subaudit.integrations.deep, .networks; subaudit.scenarios.deep_canaries): the
networks, the canary kinds, one audit end to end, and its determinism."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from opacus.validators import ModuleValidator

from subaudit.data import Dataset
from subaudit.estimation.procedures import PROCEDURES, procedure_epsilon
from subaudit.integrations import deep
from subaudit.integrations.networks import NETWORKS, build, parameter_count
from subaudit.pipeline.costs import NETWORK_COSTS, NETWORK_NAMES, audit_job_resources
from subaudit.scenarios.deep_canaries import DEEP_KINDS, SCORES, Pairs, make_pairs
from subaudit.validation import ParameterError

pytestmark = [pytest.mark.filterwarnings("ignore:Full backward hook"),
              pytest.mark.filterwarnings("ignore:Secure RNG")]

METAGRADIENT = {"metasteps": 2, "canary_lr": 0.05, "network": "cnn", "width": 4, "steps": 3, "batch": 32, "lr": 0.5,
                "base": 64, "base_from": "public"}


def test_networks_are_the_papers_and_opacus_can_train_them():
    assert set(NETWORKS) == set(NETWORK_NAMES)
    cnn = build("sample-convnet", classes=10, channels=1, size=28, seed=0)
    wrn = build("wrn-16-4", classes=10, channels=3, size=32, seed=0)
    # Opacus' MNIST example network has 26,010 parameters; WRN-16-4 about 2.7M (De et al. 2022)
    assert parameter_count(cnn) == 26_010 and 2_700_000 < parameter_count(wrn) < 2_800_000
    assert ModuleValidator.validate(cnn, strict=False) == [] == ModuleValidator.validate(wrn, strict=False)
    assert cnn(torch.rand(3, 1, 28, 28)).shape == (3, 10) and wrn(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    again = build("sample-convnet", classes=10, channels=1, size=28, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(cnn.parameters(), again.parameters()))
    # the cost registry's parameter counts are the built networks' at its reference inputs
    small, wide = NETWORK_COSTS["sample-convnet"], NETWORK_COSTS["wrn-16-4"]
    assert (small.parameters, small.pixels) == (parameter_count(cnn), 28 * 28)
    assert (wide.parameters, wide.pixels) == (parameter_count(wrn), 3 * 32 * 32)


def test_the_cnns_max_pool_is_torchs_value_for_value_and_gradient_for_gradient():
    """SampleConvNet's pooling (channels-last kernel, same indices, torch's own backward) against
    F.max_pool2d bit for bit: tanh-saturated ties (the first of a window wins), NaN (taken),
    -inf, a whole network's per-example gradients under Opacus."""
    from torch.nn import functional as F

    from subaudit.integrations.networks import max_pool_2x2

    g = torch.Generator().manual_seed(0)
    x = torch.tanh(4 * torch.randn(64, 16, 14, 14, generator=g, dtype=torch.float64))
    x[0, 0, :3, :3] = 1.0                       # a plateau: every window of it ties
    x[1, 2, 5, 5], x[1, 2, 6, 6], x[2, 3, 0, 0] = float("nan"), float("nan"), float("-inf")
    for t in (x, x.float()):
        a, b = t.clone().requires_grad_(), t.clone().requires_grad_()
        ya, yb = max_pool_2x2(a), F.max_pool2d(b, 2, 1)
        assert torch.equal(torch.nan_to_num(ya), torch.nan_to_num(yb)) and ya.is_contiguous()
        up = torch.randn(ya.shape, generator=g, dtype=t.dtype)
        (ga,), (gb,) = torch.autograd.grad(ya, a, up), torch.autograd.grad(yb, b, up)
        assert torch.equal(ga, gb)
    with torch.no_grad():
        assert torch.equal(max_pool_2x2(x[2:]), F.max_pool2d(x[2:], 2, 1))

    from opacus import GradSampleModule

    def per_example(pool):
        torch.manual_seed(1)
        net = build("sample-convnet", classes=10, channels=1, size=28, seed=0)
        net.forward = lambda z: net.fc2(torch.tanh(net.fc1(pool(torch.tanh(net.conv2(
            pool(torch.tanh(net.conv1((z - 0.5) / 0.5)))))).flatten(1))))
        gsm = GradSampleModule(net)
        xb = torch.rand(32, 1, 28, 28, generator=torch.Generator().manual_seed(2))
        F.cross_entropy(gsm(xb), torch.arange(32) % 10).backward()
        return [p.grad_sample for p in gsm.parameters()]

    assert all(torch.equal(a, b) for a, b in zip(per_example(max_pool_2x2),
                                                  per_example(lambda z: F.max_pool2d(z, 2, 1))))


def test_an_audit_jobs_slurm_resources_grow_with_its_training():
    """Minutes: 10 + 3 x examples / (rate x reference pixels / pixels) / 60, rounded up; memory
    on the CPU: 3,000 MB + 12 bytes x parameters (scaled to the input) x physical batch."""
    case = {"steps": 400, "batch": 256, "augmentations": 1}
    selections = {"kinds": ["random", "gradient"], "games": ["membership"], "repeats": 1, "white_box_repeats": None,
                  "gradient_canaries": 1000, "gradient_scores": ["update"], "canaries": 100}
    deep_params = {"network": "sample-convnet", "physical_batch": None, "cases": {"scratch": case}, **selections}
    cpu = audit_job_resources(deep_params, "scratch", "cpu", (28, 28))
    assert cpu["runtime"] == 10 + int(np.ceil(3 * 400 * 256 / 2_857 / 60)) == 12
    assert cpu["mem_mb"] == 3_000 + int(np.ceil((256 + 64) * 12 * 26_010 / 2**20))
    # its output: each canary's record, at most every canary of the case (100 random, 1,000 gradient)
    assert audit_job_resources(deep_params, "scratch", "cuda", (28, 28)) == {
        "runtime": 11, "mem_mb": 3_000, "expected_s": int(np.ceil(400 * 256 / 10_492)),   # expected: no margin
        "out_kb": 16 + int(np.ceil(1100 * 41 / 1024))}
    paper = {"network": "wrn-16-4", "physical_batch": 64, **selections,
             "cases": {"scratch": {"steps": 3405, "batch": 4096, "augmentations": 16}}}
    gpu = audit_job_resources(paper, "scratch", "cuda", (32, 32, 3))
    assert gpu["runtime"] == 10 + int(np.ceil(3 * 3405 * 4096 * 16 / 8_843 / 60))   # about 21 hours
    assert 20 * 60 < gpu["runtime"] < 22 * 60
    assert audit_job_resources(paper, "scratch", "cpu", (32, 32, 3))["mem_mb"] == 3_000 + int(
        np.ceil(64 * 12 * 2_748_890 / 2**20))


def test_the_pretraining_jobs_resources_grow_with_its_epochs():
    """Minutes: 10 + 3 x epochs x public images / (the network's Opacus rate, scaled to the
    input) / 60, rounded up (a bound: a non-private step needs no per-example gradients);
    memory on the CPU: 3,000 MB + 12 bytes x parameters x batch, on a GPU 3,000 MB."""
    from subaudit.pipeline.costs import pretrain_job_resources

    default = {"network": "sample-convnet", "sizes": {"public": 4000}, "pretrain": {"epochs": 3, "batch": 128}}
    cpu = pretrain_job_resources(default, "cpu", (28, 28))
    assert cpu == {"runtime": 10 + int(np.ceil(3 * 3 * 4000 / 2_857 / 60)),
                   "mem_mb": 3_000 + int(np.ceil(128 * 12 * 26_010 / 2**20)),
                   "expected_s": int(np.ceil(3 * 4000 / 2_857)),
                   "out_kb": 16 + int(np.ceil(4 * 26_010 / 1024))}     # the network's parameters
    paper = {"network": "wrn-16-4", "sizes": {"public": 3000}, "pretrain": {"epochs": 30, "batch": 256}}
    assert pretrain_job_resources(paper, "cpu", (32, 32, 3))["runtime"] == 10 + int(np.ceil(3 * 30 * 3000 / 16.2 / 60))
    assert pretrain_job_resources(paper, "cuda", (32, 32, 3)) == {
        "runtime": 10 + int(np.ceil(3 * 30 * 3000 / 8_843 / 60)), "mem_mb": 3_000,
        "expected_s": int(np.ceil(30 * 3000 / 8_843)), "out_kb": 16 + int(np.ceil(4 * 2_748_890 / 1024))}


@pytest.fixture(scope="module")
def data() -> deep.DeepData:
    """Synthetic 28x28 'images': class c is a bright square at position c, plus noise."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, 900)
    x = rng.integers(0, 60, size=(900, 28, 28)).astype(np.uint8)
    for i, c in enumerate(y):
        x[i, 2 * c:2 * c + 8, 2 * c:2 * c + 8] = 250
    return deep.split_images(Dataset("image", x, y, 10, "synthetic"),
                             {"train": 400, "pool": 192, "public": 200, "test": 100}, seed=1)


def test_split_is_disjoint_and_sized(data):
    parts = [data.train, data.pool, data.public, data.test]
    assert [len(p[1]) for p in parts] == [400, 192, 200, 100] and data.shape == (1, 28)
    assert all(float(p[0].min()) >= 0 and float(p[0].max()) <= 1 for p in parts)
    with pytest.raises(ParameterError, match="sizes"):
        deep.split_images(Dataset("image", np.zeros((10, 28, 28), np.uint8), np.zeros(10, np.int64), 10, "s"),
                          {"train": 8, "pool": 2, "public": 1, "test": 1}, seed=0)


def test_canary_kinds_draw_disjoint_pool_images(data):
    kinds = [k for k, e in DEEP_KINDS.items() if not e.white_box]
    pairs = deep.make_canaries(data, kinds, 32, seed=3, metagradient=METAGRADIENT)
    pool_x, pool_y = data.pool
    rows = {}
    for kind in ("random", "mislabeled"):
        p = pairs[kind]
        assert p.x.shape == (32, 2, 1, 28, 28) and p.y.shape == (32, 2)
        # each record is a pool image; find which
        flat = p.x.reshape(64, -1)
        match = (flat[:, None, :] == pool_x.reshape(len(pool_x), -1)[None]).all(-1)
        assert bool(match.any(1).all())
        rows[kind] = set(match.float().argmax(1).tolist())
        truth = pool_y[match.float().argmax(1)].reshape(32, 2)
        assert torch.equal(p.y, truth) if kind == "random" else bool((p.y != truth).all())
    assert not rows["random"] & rows["mislabeled"]
    meta = pairs["metagradient"]
    assert meta.x.shape == (32, 2, 1, 28, 28) and float(meta.x.min()) >= 0 and float(meta.x.max()) <= 1
    with pytest.raises(ParameterError, match="kind"):
        make_pairs("gradient", pool_x, pool_y, 4, classes=10, seed=0)
    with pytest.raises(ParameterError, match="pool"):
        deep.make_canaries(data, kinds, 64, seed=3, metagradient=METAGRADIENT)


@pytest.mark.parametrize("base_from", ["public", "train"])
def test_the_proxy_trains_on_the_records_base_from_names(data, base_from):
    """base_from: train optimises against the audited training's own non-canary images (as
    the paper), public against the public images: the canaries equal the kind's own
    optimisation given those records, and differ between the two."""
    from subaudit.seeding import derive_seed

    options = {**METAGRADIENT, "network": "resnet-9", "lr": 0.1, "base_from": base_from}
    pairs = deep.make_canaries(data, ["metagradient"], 8, seed=3, metagradient=options)["metagradient"]
    records = data.train if base_from == "train" else data.public
    direct = make_pairs("metagradient", data.pool[0][:16], data.pool[1][:16], 8, classes=10,
                        seed=derive_seed(3, "deep-kind", "metagradient"), base=records, options=options)
    assert torch.equal(pairs.x, direct.x) and torch.equal(pairs.y, direct.y)
    other = {**options, "base_from": "public" if base_from == "train" else "train"}
    assert not torch.equal(pairs.x, deep.make_canaries(data, ["metagradient"], 8, seed=3,
                                                       metagradient=other)["metagradient"].x)
    with pytest.raises(ParameterError, match="base_from"):
        deep.make_canaries(data, ["metagradient"], 8, seed=3, metagradient={**options, "base_from": "test"})


def test_the_cost_counts_every_training():
    """audit_examples: games x repeats x trainings per audit (deep.trainings) x
    steps x batch x augmentations."""
    d = {"games": ["membership", "substitute"], "repeats": 3, "kinds": ["random", "gradient", "mislabeled"],
         "cases": {"scratch": {"steps": 5, "batch": 7, "augmentations": 2}, "finetune": {"steps": 11, "batch": 13}},
         "trainings": "together", "gradient_canaries": 10, "gradient_scores": ["update"], "white_box_repeats": None}
    assert deep.audit_examples(d) == {"scratch": 2 * 3 * 5 * 7 * 2, "finetune": 2 * 3 * 11 * 13}
    d["trainings"] = "each"
    assert deep.audit_examples(d) == {"scratch": 3 * 2 * 3 * 5 * 7 * 2, "finetune": 3 * 2 * 3 * 11 * 13}
    d["trainings"] = "white-box-apart"
    assert deep.audit_examples(d) == {"scratch": 2 * 2 * 3 * 5 * 7 * 2, "finetune": 2 * 2 * 3 * 11 * 13}
    # a case that chooses its own kinds, games and repeats counts its own trainings
    d["cases"]["gap"] = {"steps": 17, "batch": 19, "kinds": ["gradient"], "games": ["substitute"], "repeats": 2}
    assert deep.audit_examples(d)["gap"] == 1 * 1 * 2 * 17 * 19
    # the white-box trainings repeat white_box_repeats times; a gradient-only case's one training
    # holds every kind it audits (group "all"), so it keeps its repeats
    d["white_box_repeats"] = 1
    assert deep.audit_examples(d) == {"scratch": 2 * (3 + 1) * 5 * 7 * 2, "finetune": 2 * (3 + 1) * 11 * 13,
                                      "gap": 1 * 1 * 2 * 17 * 19}


def test_a_case_chooses_its_own_selections():
    """case_setting: a case's own kinds, games, repeats and gradient canaries where it names them,
    the deep phase's otherwise; case_audits lists every training once, the white-box trainings
    white_box_repeats times; case_training keeps the DP-SGD settings only."""
    from subaudit.scenarios.deep_cases import case_audits, case_setting, case_training

    d = {"kinds": ["random", "gradient"], "games": ["membership", "substitute"], "repeats": 2,
         "trainings": "white-box-apart", "gradient_canaries": 100, "gradient_scores": ["update"],
         "white_box_repeats": None, "cases": {"scratch": {"steps": 3, "batch": 4},
                   "gap": {"steps": 5, "batch": 6, "kinds": ["gradient"], "games": ["substitute"], "repeats": 1,
                           "gradient_canaries": 300, "gradient_scores": ["residual"]}}}
    assert case_setting(d, "scratch") == {"kinds": ["random", "gradient"], "games": ["membership", "substitute"],
                                          "repeats": 2, "white_box_repeats": None, "gradient_canaries": 100,
                                          "gradient_scores": ["update"]}
    assert case_setting(d, "gap")["gradient_canaries"] == 300 and case_training(d, "gap") == {"steps": 5, "batch": 6}
    # a preset takes a case's choice back by nulling it (Snakemake merges the case's mapping key by key)
    assert case_setting({**d, "cases": {"gap": {**d["cases"]["gap"], "kinds": None}}}, "gap")["kinds"] == d["kinds"]
    assert case_audits(d) == [("scratch", g, group, r) for g in ("membership", "substitute")
                              for group in ("inputs", "gradient") for r in (0, 1)] + [("gap", "substitute", "all", 0)]
    d["white_box_repeats"] = 1                      # the gradient canaries' own trainings once per game
    d["cases"]["finetune"] = {"steps": 3, "batch": 4, "white_box_repeats": 3}   # a case's own choice
    assert case_audits(d) == [("scratch", g, group, r) for g in ("membership", "substitute")
                              for group, n in (("inputs", 2), ("gradient", 1)) for r in range(n)] + \
        [("gap", "substitute", "all", 0)] + \
        [("finetune", g, group, r) for g in ("membership", "substitute")
         for group, n in (("inputs", 2), ("gradient", 3)) for r in range(n)]


def test_optimised_canaries_are_made_with_fixed_threads_whatever_the_process_has(data, monkeypatch):
    """The metagradient canaries' pixels depend on torch's thread count (a reduction's split), so
    make_canaries optimises with CANARY_THREADS whatever the caller set, and restores it after."""
    seen = {}

    def spy(kind, *args, **kwargs):
        seen[kind] = torch.get_num_threads()
        return Pairs(torch.zeros(1), torch.zeros(1))

    monkeypatch.setattr(deep, "make_pairs", spy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        deep.make_canaries(data, ["random", "metagradient"], 4, seed=1,
                           metagradient={"base_from": "public"})
        assert seen == {"random": 1, "metagradient": deep.CANARY_THREADS} and deep.CANARY_THREADS == 2
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def _audit(data, pairs, game, case="scratch", init=None, threads=None):
    training = deep.Training(steps=6, batch=64, lr=1.0, momentum=0.0, noise_multiplier=1.0, clip=1.0)
    if threads:
        torch.set_num_threads(threads)
    return deep.run_audit(case, game, 0, data=data, pairs=pairs, network="sample-convnet", training=training,
                          gradient_canaries=32, init=init, scores=list(SCORES), seed=11)


def _rows(audit):
    return deep.audit_rows(audit, delta=1e-5, alpha=0.05, procedures=list(PROCEDURES))


def test_an_audit_reports_every_kind_score_and_procedure_deterministically(data, tmp_path):
    pairs = deep.make_canaries(data, ["random", "mislabeled"], 32, seed=3)
    first = _audit(data, pairs, "substitute", threads=2)
    rows = _rows(first)
    kinds = {(r["kind"], r["score"], r["procedure"]) for r in rows}
    assert kinds == {(k, s, p) for k in ("random", "mislabeled") for s in SCORES for p in PROCEDURES} | {
        ("gradient", "update", p) for p in PROCEDURES}
    for r in rows:
        assert r["adjacency"] == "substitute" and 0 <= r["epsilon"] <= r["perfect"]
        assert (r["ceiling"] is not None) == (r["kind"] == "gradient")
        assert r["eps_substitute"] == r["reference"] > r["eps_add_remove"] > 0
        assert (r["case"], r["game"], r["repeat"], r["steps"]) == ("scratch", "substitute", 0, 6)
    # the examples processed are Opacus' Poisson batches: about steps x batch
    assert 6 * 64 * 0.5 < first.info["examples"] < 6 * 64 * 1.5
    again = _audit(data, pairs, "substitute", threads=1)
    assert _rows(again) == rows and again.info == first.info  # same seed, same numbers, one thread or two
    # saved and read back: the same rows (seconds are not saved)
    deep.save_audit(tmp_path / "a.npz", first)
    assert _rows(deep.load_audit(tmp_path / "a.npz")) == rows
    member = _rows(_audit(data, pairs, "membership"))
    assert {r["adjacency"] for r in member} == {"add-remove"}


def test_an_audit_recomputes_from_its_scores(data):
    """The rows' bounds are the procedures applied to the audit's own scores and bits."""
    pairs = deep.make_canaries(data, ["mislabeled"], 48, seed=4)
    audit = _audit(data, pairs, "membership")
    rows = _rows(audit)
    row = next(r for r in rows if r["kind"] == "mislabeled" and r["score"] == "loss" and r["procedure"] == "steinke")
    scores, bits = audit.scores["mislabeled"]["loss"], audit.bits["mislabeled"]
    assert scores.shape == (48, 2) and bits.shape == (48,)
    assert row["epsilon"] == procedure_epsilon("steinke", scores, bits, 1e-5, game="membership")
    grad = next(r for r in rows if r["kind"] == "gradient" and r["procedure"] == "mahloujifar")
    assert grad["epsilon"] == procedure_epsilon("mahloujifar", audit.scores["gradient"]["update"],
                                                audit.bits["gradient"], 1e-5, game="membership")
    assert audit.info["sample_rate"] == 64 / len(data.train[1])  # the batch over the base data, whatever the bits


def test_finetune_needs_weights_and_scratch_refuses_them(data):
    pairs = deep.make_canaries(data, ["random"], 16, seed=3)
    state = deep.pretrain("sample-convnet", data, epochs=1, batch=64, lr=0.05, seed=2)
    with pytest.raises(ParameterError, match="init"):
        _audit(data, pairs, "substitute", case="finetune")
    with pytest.raises(ParameterError, match="init"):
        _audit(data, pairs, "substitute", case="scratch", init=state)
    tuned = _audit(data, pairs, "substitute", case="finetune", init=state)
    assert tuned.info["test_accuracy"] > 0.3  # the pretrained network starts far above chance (0.1)


def test_augmentation_multiplicity_averages_k_gradients_before_clipping():
    """Opacus' DP step with augmentation multiplicity K equals, computed directly: each record's
    gradient averaged over its K augmented views, then clipped to C, summed and divided by the
    expected batch (noise multiplier 0, so the step is exact)."""
    from opacus.grad_sample import GradSampleModule
    from opacus.optimizers import DPOptimizer

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(2 * 6 * 6, 3))
    twin = copy.deepcopy(net)
    x, y, k, clip = torch.rand(5, 1, 8, 8), torch.tensor([0, 1, 2, 1, 0]), 4, 0.05
    views = deep.augment(x, k, torch.Generator().manual_seed(3))
    assert views.shape == (20, 1, 8, 8)
    # the views are crops of the padded image, some flipped: every view's pixels come from its record
    for i in range(5):
        assert all(set(views[i * k + j].flatten().tolist()) <= set(x[i].flatten().tolist()) | {0.0} for j in range(k))
    model = GradSampleModule(net)
    opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=1.0), noise_multiplier=0.0, max_grad_norm=clip,
                      expected_batch_size=5)
    torch.nn.functional.cross_entropy(model(views), y.repeat_interleave(k)).backward()
    deep.average_augmentations(model.parameters(), k)
    assert opt.pre_step()
    got = torch.cat([p.grad.flatten() for p in model.parameters()])
    total = torch.zeros_like(got)
    for i in range(5):
        grads = []
        for j in range(k):
            loss = torch.nn.functional.cross_entropy(twin(views[i * k + j:i * k + j + 1]), y[i:i + 1])
            grads.append(torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(twin.parameters()))]))
        mean = torch.stack(grads).mean(0)
        total += mean * min(1.0, clip / float(mean.norm()))
    assert torch.allclose(got, total / 5, atol=1e-7, rtol=1e-5)
    assert float(torch.stack(grads).mean(0).norm()) > clip  # clipping binds: its order matters here


def test_one_kind_per_training(data):
    """deep.trainings: each: a training of one input kind holds only its pairs; one of the gradient kind
    holds no input canaries; each group's training has seeds of its own."""
    pairs = deep.make_canaries(data, ["random"], 16, seed=3)
    training = deep.Training(steps=3, batch=64, lr=1.0, momentum=0.0, noise_multiplier=1.0, clip=1.0)
    common = dict(data=data, network="sample-convnet", training=training, init=None, scores=["loss"], seed=11)
    alone = deep.run_audit("scratch", "membership", 0, pairs=pairs, gradient_canaries=0, group="random", **common)
    assert set(alone.scores) == {"random"} and alone.info["group"] == "random"
    white = deep.run_audit("scratch", "membership", 0, pairs={}, gradient_canaries=32, group="gradient", **common)
    assert set(white.scores) == {"gradient"} and white.bits["gradient"].shape == (32,)
    together = deep.run_audit("scratch", "membership", 0, pairs=pairs, gradient_canaries=0, **common)
    assert together.info["group"] == "all"
    assert not np.array_equal(together.bits["random"], alone.bits["random"])  # another training's draw
    with pytest.raises(ParameterError, match="pairs"):
        deep.run_audit("scratch", "membership", 0, pairs={}, gradient_canaries=0, group="random", **common)


def test_white_box_apart_trains_the_gradient_canaries_alone(data):
    """deep.trainings: white-box-apart gives each audit two trainings: the input kinds together
    without gradient canaries, and the gradient canaries alone, the very training the gradient
    kind gets with one kind per training (same group, same seeds, same scores), whatever input
    kinds the audit has. The input kinds' scores there are not those of a training that also
    holds the gradient canaries."""
    from subaudit.scenarios.deep_cases import group_canaries, training_groups

    kinds = ["random", "mislabeled", "gradient"]
    assert training_groups(kinds, "together") == ["all"]
    assert training_groups(kinds, "white-box-apart") == ["inputs", "gradient"]
    assert training_groups(kinds, "each") == kinds
    assert training_groups(["random"], "white-box-apart") == training_groups(["gradient"], "white-box-apart") == ["all"]
    assert group_canaries("inputs", kinds) == (["random", "mislabeled"], False)
    assert group_canaries("gradient", kinds) == ([], True)
    assert group_canaries("all", kinds) == (["random", "mislabeled"], True)
    assert group_canaries("mislabeled", kinds) == (["mislabeled"], False)

    pairs = deep.make_canaries(data, ["random", "mislabeled"], 16, seed=3)
    training = deep.Training(steps=3, batch=64, lr=1.0, momentum=0.0, noise_multiplier=1.0, clip=1.0)
    common = dict(data=data, network="sample-convnet", training=training, init=None, scores=["loss"], seed=11)

    def audit(group, all_kinds, trainings):
        assert group in training_groups(all_kinds, trainings)
        inputs, white = group_canaries(group, all_kinds)
        return deep.run_audit("scratch", "substitute", 0, pairs={k: pairs[k] for k in inputs},
                              gradient_canaries=64 if white else 0, group=group, **common)

    apart = audit("gradient", kinds, "white-box-apart")
    alone = audit("gradient", ["gradient"], "each")
    assert set(apart.scores) == {"gradient"}
    assert np.array_equal(apart.scores["gradient"]["update"], alone.scores["gradient"]["update"])
    assert np.array_equal(apart.bits["gradient"], alone.bits["gradient"])
    inputs = audit("inputs", kinds, "white-box-apart")
    assert set(inputs.scores) == {"random", "mislabeled"}
    together = audit("all", kinds, "together")
    assert set(together.scores) == {"random", "mislabeled", "gradient"}
    assert not np.array_equal(inputs.scores["random"]["loss"], together.scores["random"]["loss"])


def test_a_diverged_training_fails_naming_its_setting(data):
    """An update that overflows the parameters (lr x noise beyond float32): run_audit raises Diverged naming the
    case's keys, instead of returning NaN scores that a job would write as complete."""
    from subaudit.validation import Diverged

    pairs = deep.make_canaries(data, ["random"], 8, seed=3)
    training = deep.Training(steps=4, batch=64, lr=1e30, momentum=0.0, noise_multiplier=1e12, clip=1.0)
    with pytest.raises(Diverged, match=r"deep.cases.scratch \(lr 1e\+30.*lower deep.cases.scratch.lr"):
        deep.run_audit("scratch", "membership", 0, data=data, pairs=pairs, network="sample-convnet",
                       training=training, gradient_canaries=0, init=None, scores=["loss"], seed=11)


@pytest.mark.parametrize(("augmentations", "physical"), [(1, 16), (2, 7)])
def test_physical_batches_give_the_unsplit_step(data, augmentations, physical):
    """A Poisson batch of about 64 records processed in physical batches of 16 (or 7, with two
    views each): the same sampling, one noisy step per Poisson batch with the gradient canaries
    inserted once, the same accounting; parameters and gradient-canary scores equal the
    unsplit training's to float rounding (a different summation order), input-canary scores too."""
    pairs = deep.make_canaries(data, ["random"], 16, seed=3)
    out = {}
    for split in (None, physical):
        training = deep.Training(steps=3, batch=64, lr=1.0, momentum=0.0, noise_multiplier=1.0, clip=1.0,
                                 augmentations=augmentations, physical_batch=split)
        out[split] = deep.run_audit("scratch", "substitute", 0, data=data, pairs=pairs, network="sample-convnet",
                                    training=training, gradient_canaries=32, init=None, scores=["loss"], seed=11)
    whole, parts = out[None], out[physical]
    assert whole.history == parts.history and whole.info["examples"] == parts.info["examples"] > 3 * physical
    for kind in ("random", "gradient"):
        assert np.array_equal(whole.bits[kind], parts.bits[kind])
        for score, values in whole.scores[kind].items():
            np.testing.assert_allclose(parts.scores[kind][score], values, rtol=1e-4, atol=1e-5)
    assert whole.info["test_accuracy"] == pytest.approx(parts.info["test_accuracy"], abs=0.02)
    with pytest.raises(ParameterError, match="physical_batch"):
        deep.train_private(torch.nn.Linear(2, 2), None, None,
                           deep.Training(steps=1, batch=4, lr=1.0, momentum=0.0, noise_multiplier=1.0, clip=1.0,
                                         physical_batch=0), seed=0, gradient=False)


def test_poisson_batches_are_the_first_steps_batches_epoch_after_epoch():
    """A training's batches: the loader's, across epochs, until ``steps``; one more is drawn
    (its sampler's generator ends where a loop over epochs leaves it), none handed on."""
    fetched = []

    class Loader:
        def __iter__(self):
            for i in range(3):
                fetched.append(i)
                yield i

    assert list(deep.poisson_batches(Loader(), 7)) == [0, 1, 2, 0, 1, 2, 0]
    assert fetched == [0, 1, 2, 0, 1, 2, 0, 1]
    assert list(deep.poisson_batches(Loader(), 0)) == []


def test_bf16_trains_what_fp32_trains_within_rounding(data):
    """deep.precision: bf16 autocasts the forward (the loss, clipping, noise and parameters stay
    float32): an audit's training on the CPU, same seeds, gives the fp32 audit's bits and
    accountant history exactly and its canaries' loss scores within bfloat16's rounding (the
    stated tolerance: 3% of their spread, rank correlation above 0.99); fp32 is unchanged by the
    option (the same scores bit for bit as before it existed, which the determinism tests hold);
    tf32 on the CPU is fp32; a name not in PRECISIONS is refused."""
    from scipy import stats

    from subaudit.scenarios.deep_cases import PRECISIONS

    assert set(PRECISIONS) == {"fp32", "tf32", "bf16"}
    pairs = deep.make_canaries(data, ["random", "mislabeled"], 16, seed=3)
    runs = {}
    for precision in ("fp32", "tf32", "bf16"):
        training = deep.Training(steps=4, batch=64, lr=1.0, momentum=0.0, noise_multiplier=1.0, clip=1.0,
                                 precision=precision)
        runs[precision] = deep.run_audit("scratch", "membership", 0, data=data, pairs=pairs, network="sample-convnet",
                                         training=training, gradient_canaries=0, init=None, scores=["loss"], seed=11)
    fp32, bf16 = runs["fp32"], runs["bf16"]
    assert "precision" not in fp32.info and bf16.info["precision"] == "bf16"
    for kind in ("random", "mislabeled"):
        np.testing.assert_array_equal(runs["tf32"].scores[kind]["loss"], fp32.scores[kind]["loss"])
        np.testing.assert_array_equal(bf16.bits[kind], fp32.bits[kind])
        a, b = fp32.scores[kind]["loss"].ravel(), bf16.scores[kind]["loss"].ravel()   # (m, 2): both records
        assert not np.array_equal(a, b)                                  # bfloat16 did round
        assert np.max(np.abs(a - b)) <= 0.03 * (a.max() - a.min()), (kind, np.max(np.abs(a - b)), np.ptp(a))
        assert stats.spearmanr(a, b).statistic > 0.99
    assert bf16.history == fp32.history
    training = deep.Training(steps=1, batch=64, lr=1.0, momentum=0.0, noise_multiplier=1.0, clip=1.0, precision="fp16")
    with pytest.raises(ParameterError, match="precision"):
        deep.run_audit("scratch", "membership", 0, data=data, pairs=pairs, network="sample-convnet",
                       training=training, gradient_canaries=0, init=None, scores=["loss"], seed=11)
