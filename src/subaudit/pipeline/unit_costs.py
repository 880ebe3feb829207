"""The cost model's per-unit costs (:mod:`subaudit.pipeline.costs`) measured where jobs run.

Every request the workflow makes scales a per-unit cost measured once, on one machine
(the engine's seconds per layer-step and per example x parameter, an accountant evaluation, an
S1 run-step, a backbone's and a proxy network's multiply-accumulates per second, Opacus'
examples per second of a deep network). The ``unit_costs`` job measures each again on the node
it runs on, at a size where the unit shows (about a second of work each, not the start-up that
the rehearsal's small jobs are made of), and writes the measured seconds beside the modelled
ones: the ratio says how far the cluster's node is from the model's machine, before the
paper's jobs are submitted. The rehearsal's test requires every ratio within
:data:`AGREEMENT`. Seconds on the CPU are the process's CPU time (:func:`clock`): what a core
does, not how busy the node is.

Only what can be measured in this process is here; Opacus' rate is measured by
:func:`subaudit.integrations.deep.training_rate` and set beside its model by :func:`network`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from subaudit.pipeline import costs

__all__ = ["AGREEMENT", "ENGINE_WORKLOADS", "UnitCost", "accountant", "backbone", "clock", "engine", "measure",
           "network", "proxy", "s1", "table"]

#: The range of measured/modelled seconds within which a node agrees with the model. Above: a
#: job's time limit carries a margin of 3 over its model plus fixed minutes
#: (:data:`subaudit.job_requests.RUNTIME_MARGIN`), so a slower node's long jobs would be killed.
#: Below, a faster node only asks for more time than it uses: the model is an envelope (the
#: default run's training jobs ran 0.31 to 2.1 times it; the 384-2 head at q = 1, 0.3 times
#: alone and 0.6 in the rehearsal's job on the AMD EPYC VM, 2026-11-30), and a tenfold gap is a
#: wrong unit or constant.
AGREEMENT = (1 / 10, 3.0)


@dataclass(frozen=True)
class UnitCost:
    """One per-unit cost: what was measured (``unit``, the cost model's constant it checks, and
    ``setting``), the seconds the model gives for that work and the seconds it took here."""

    unit: str
    setting: str
    modelled_s: float
    measured_s: float
    device: str = "cpu"

    @property
    def ratio(self) -> float:
        """Measured over modelled seconds (above 1: this node is slower than the model)."""
        return self.measured_s / self.modelled_s

    def to_dict(self) -> dict[str, Any]:
        """Its fields and ratio, as the ``unit_costs`` job writes them."""
        return {**asdict(self), "ratio": self.ratio}


def clock(device: str) -> Callable[[], float]:
    """The clock a unit's seconds are read from on ``device``: on the CPU the process's CPU time,
    since each unit runs on one thread, so that it measures the core and not what else the node
    runs (on 2 cores beside four busy processes the wall time of the same units measured 2 to
    4.7 times the model, their CPU time 0.6 to 1.9 times, as alone); on a GPU the wall time,
    of which the host's CPU time sees only the launches."""
    return time.perf_counter if device.startswith("cuda") else time.process_time


def _best(work: Callable[[], Any], repeats: int = 5) -> float:
    """Best CPU seconds (:func:`clock`) of ``repeats`` calls of ``work`` after one warm-up call."""
    seconds = clock("cpu")
    work()
    best = float("inf")
    for _ in range(repeats):
        t0 = seconds()
        work()
        best = min(best, seconds() - t0)
    return best


def engine(sizes: Sequence[int], records: int, q: float, optimizer: str, runs: int, steps: int,
           device: str = "cpu") -> UnitCost:
    """The engine's model-step costs (:data:`~subaudit.pipeline.costs.ENGINE_COSTS`): ``runs``
    models of ``sizes`` trained for ``steps`` steps on ``records`` random records at rate ``q``
    on one thread, as a training job trains them (in a linear head's span where it fits)."""
    from subaudit.devices import fixed_threads
    from subaudit.engine.bench import Workload, engine_rate

    w = Workload("unit", tuple(sizes), records, q, optimizer, "zero" if optimizer == "sgd" else "random",
                 runs, steps, 0, "unit")
    with fixed_threads(1):
        rate = engine_rate(w, steps, runs, device, clock=clock(device))
    parameters = costs.trained_parameters(sizes, records, optimizer)
    modelled = runs * steps * costs.model_step_seconds(sizes, q * records + 1, device, parameters)
    shape = "-".join(map(str, sizes))
    return UnitCost("ENGINE_COSTS", f"{shape} q={q:g} {optimizer}, {runs} runs x {steps} steps", modelled,
                    runs * steps / rate, device)


def accountant(q: float, steps: int, sigma: float) -> UnitCost:
    """An accountant evaluation (:func:`~subaudit.pipeline.costs.accountant_evaluation_seconds`):
    the substitute epsilon at noise ``sigma``, ``q`` over ``steps``, its caches emptied before
    each."""
    from subaudit.accounting import epsilon
    from subaudit.accounting.composition import clear_cache
    from subaudit.devices import fixed_threads

    def one() -> None:
        clear_cache()
        epsilon(sigma, q, steps, 1e-5, "substitute")

    with fixed_threads(1):
        seconds = _best(one)
    return UnitCost("ACCOUNTANT_EVALUATION_S", f"q={q:g} T={steps}",
                    costs.accountant_evaluation_seconds(q, steps), seconds)


def s1(q: float, steps: int, runs_per_world: int) -> UnitCost:
    """S1's run-steps (:data:`~subaudit.pipeline.costs.S1_RUN_STEP_S`): one simulation of
    2 x ``runs_per_world`` runs over ``steps`` steps at ``q``, scored at its last step."""
    from subaudit.devices import fixed_threads
    from subaudit.scenarios.s1 import simulate_s1

    with fixed_threads(1):
        seconds = _best(lambda: simulate_s1(1.0, q, steps, runs_per_world, seed=0, checkpoints=[steps]))
    return UnitCost("S1_RUN_STEP_S", f"q={q:g} T={steps}, {2 * runs_per_world} runs",
                    costs.s1_seconds(1, runs_per_world, [steps], q), seconds)


def backbone(name: str, resolution: int, records: int) -> UnitCost:
    """A backbone's multiply-accumulates per second on one CPU thread
    (:attr:`~subaudit.data.backbones.Backbone.cpu_macs_per_s`): ``records`` images at
    ``resolution`` pixels (random weights: the rate does not depend on them) or sentences
    through the network, without gradients."""
    import torch

    from subaudit.data.backbones import BACKBONES, COST_TOKENS
    from subaudit.devices import fixed_threads

    bb = BACKBONES[name]
    with fixed_threads(1), torch.no_grad():
        if bb.family == "image":
            from subaudit.data.features import create_image_model

            model = create_image_model(name, pretrained=False).eval()
            x = torch.rand(records, 3, resolution, resolution)
            seconds = _best(lambda: model(x))
        else:
            from subaudit.data.features import load_text_backbone

            model = load_text_backbone(name, "cpu")
            sentences = [" ".join(["word"] * (COST_TOKENS - 2))] * records
            seconds = _best(lambda: model.encode(sentences, batch_size=records))
    return UnitCost("Backbone.cpu_macs_per_s", f"{name}, {records} records at {resolution} px"
                    if bb.family == "image" else f"{name}, {records} sentences",
                    costs.backbone_seconds(name, records, resolution, "cpu"), seconds)


def proxy(name: str, image: tuple[int, int, int], width: int, batch: int, steps: int) -> UnitCost:
    """A proxy network's metastep rate (:attr:`~subaudit.scenarios.canary_optimisation.
    ProxyNetwork.macs_per_second`): one metastep of ``steps`` inner steps of ``batch`` random
    images of shape ``image`` (C, H, W), on one thread like every other unit here, against the
    rate measured at the crafting's two threads (so the ratio overstates the crafting's time: by
    1.4-1.6x on the AMD EPYC VM where one thread measured 0.35 s and two 0.22-0.24 s at width 8,
    4 steps of 32)."""
    import torch

    from subaudit.devices import fixed_threads
    from subaudit.scenarios.canary_optimisation import Proxy, metagradient

    p = Proxy(width=width, steps=steps, batch=batch, base=batch, network=name)
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(8, *image, generator=g), torch.randint(0, 10, (8,), generator=g)
    bx, by = torch.rand(batch, *image, generator=g), torch.randint(0, 10, (batch,), generator=g)
    with fixed_threads(1):
        seconds = _best(lambda: metagradient(x, y, bx, by, classes=10, proxy=p, seed=0, step=0), repeats=1)
    return UnitCost("ProxyNetwork.macs_per_second", f"{name} width {width}, {steps} steps of {batch}",
                    costs.metastep_seconds(name, image, width, steps, batch, "cpu"), seconds)


def network(name: str, shape: tuple[int, ...], batch: int, examples_per_s: float, device: str = "cpu"
            ) -> UnitCost:
    """Opacus' examples per second of a deep network (:data:`~subaudit.pipeline.costs.NETWORK_COSTS`)
    at ``batch`` images of ``shape`` ((H, W) grey or (H, W, C), as a source gives it), as
    measured (``examples_per_s``, by :func:`subaudit.integrations.deep.training_rate` on
    :func:`clock`), beside
    the model's rate for the same images."""
    rate = costs.network_rate(name, device, shape)
    return UnitCost("NETWORK_COSTS", f"{name} (Opacus), batch {batch} of {'x'.join(map(str, shape))}",
                    batch / rate, batch / examples_per_s, device)


#: The engine's workloads measured (layer sizes, records, q, optimizer, runs, steps): the
#: default's image head dense (q = 1) and per run (q = 1/16), a head whose layer cost dominates,
#: and the DP-Adam MLP; each about a second of model-steps on one thread.
ENGINE_WORKLOADS: tuple[tuple[tuple[int, ...], int, float, str, int, int], ...] = (
    ((1280, 10), 500, 1.0, "sgd", 128, 20),
    ((1280, 10), 500, 0.0625, "sgd", 320, 20),
    ((384, 2), 1000, 1.0, "sgd", 320, 20),
    ((256, 128, 26), 500, 0.25, "adam", 128, 10),
)


def measure(backbones: Sequence[str], proxy_network: str | None, device: str = "cpu",
            progress: Callable[[str], None] = lambda _: None) -> list[UnitCost]:
    """Every per-unit cost but a deep network's (:func:`network`): the engine's
    (:data:`ENGINE_WORKLOADS`, on ``device``), the accountant's and S1's, each backbone's of
    ``backbones`` and the proxy network's (None: none), each a second of work or less."""
    out = []
    for sizes, records, q, optimizer, runs, steps in ENGINE_WORKLOADS:
        out.append(engine(sizes, records, q, optimizer, runs, steps, device))
        progress(out[-1].setting)
    out += [accountant(1.0, 500, 20.0), accountant(0.0625, 500, 1.0), s1(0.25, 500, 5000)]
    progress("accountant and S1")
    for name in backbones:
        out.append(backbone(name, 64, 8))
        progress(name)
    if proxy_network is not None:
        out.append(proxy(proxy_network, (3, 32, 32), 8, 32, 4))
        progress(proxy_network)
    return out


def table(units: Sequence[UnitCost]) -> str:
    """The measured costs as a table: unit, setting, modelled and measured seconds, ratio."""
    lines = [f"{'per-unit cost':30s} {'setting':55s} {'modelled s':>10s} {'measured s':>10s} {'ratio':>6s}"]
    lines += [f"{u.unit:30s} {u.setting:55s} {u.modelled_s:10.3f} {u.measured_s:10.3f} {u.ratio:6.2f}"
              for u in units]
    return "\n".join(lines)
