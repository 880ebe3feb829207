"""Metagradient-optimised canaries: m images optimised by gradient through non-private training
of a small proxy network, then transferred to the audited DP training.

After "Optimizing canaries for privacy auditing with metagradient descent" (shared papers,
Section 3 and Algorithm 5).  Each *metastep* t

1. splits the canaries at random into halves C_in and C_out (exactly m // 2 inside);
2. trains a proxy network from a fresh initialisation, non-privately (plain SGD, no
   momentum), on a fresh random subset of the base records plus C_in, in a fresh shuffled
   order, keeping the autograd graph of every inner step (``create_graph=True``);
3. evaluates the surrogate objective on the final weights w,
   ``phi(w) = sum_i (1{z_i in C_in} - 1{z_i in C_out}) L(w, z_i)`` (cross-entropy: low loss
   on the inserted canaries, high loss on the held-out ones), here divided by m;
4. differentiates phi with respect to the canary pixels along both paths, the direct one
   (through ``L(w, z_i)``) and the one through the whole unrolled training (the canaries in
   C_in are in the inner batches) -- the total derivative of the paper's footnote 1 -- and
5. takes a signed gradient step on the pixels, ``x <- clamp(x - canary_lr * sign(v), 0, 1)``
   with ``v <- momentum v + grad`` (signed SGD with momentum, "signum"; no Adam): the standard
   step for pixel attacks, whose size does not depend on the gradient's scale (it varies by
   orders of magnitude with the proxy and the metastep).  ``momentum = 0`` is the plain step
   ``sign(grad)``.  The default 0.9 averages the metagradients of successive splits: one
   metastep's is dominated by its split (each canary's direct term flips sign with it), and
   on 256 MNIST canaries, 20 metasteps, the momentum step widened the loss gap of fresh
   proxies (and of a wider, longer-trained CNN) more than the plain one, which did not widen
   it at all from mislabelled starting images.

The proxy's network is a registry (:data:`PROXY_NETWORKS`, ``Proxy.network``), each written
functionally (a list of parameter tensors and ``torch.nn.functional`` calls) so that the
unroll is explicit, inputs normalised as (x - 0.5) / 0.5 inside the forward, initialised
from a ``torch.Generator`` (convolution and linear weights and biases uniform in
+-1/sqrt(fan_in), PyTorch's default layer init; GroupNorm scales 1 and shifts 0):

``cnn``
    a narrow version of Opacus' MNIST example ``SampleConvNet``: conv 8x8 stride 2 padding 3
    -> tanh -> max-pool 2 stride 1 -> conv 4x4 stride 2 -> tanh -> max-pool 2 stride 1 ->
    flatten -> linear to :data:`HIDDEN` -> tanh -> linear to the classes, with ``width`` and
    ``2 width`` channels.
``resnet-9``
    the ResNet-9 of the canary-optimisation paper's proxy (Page's DAWNBench network): 3x3
    convolutions without bias, each followed by a normalisation and ReLU, of ``width``,
    ``2 width``, ``4 width`` and ``8 width`` channels (``width`` 64 is the usual 6.6M
    parameter network): prep; layer 1 (max-pool 2) with a residual pair; layer 2 (max-pool
    2); layer 3 (max-pool 2) with a residual pair; global max-pool; linear to the classes,
    logits scaled by 1/8.  GroupNorm (gcd(channels, 16) groups) instead of BatchNorm, so that
    the unrolled training has no running statistics and a canary's loss does not depend on
    the batch it is evaluated in.

What differs from the paper: the proxy trains for a few tens of SGD steps on a subset of
``proxy.base`` records per metastep (so that twenty metasteps take seconds on a CPU with the
``cnn``), not for full epochs; the metagradient is exact reverse-mode differentiation
through the unrolled steps (the paper's "very small-scale" route), not Engstrom et al.'s
REPLAY; the update is the signed step above (the paper leaves ``update`` unspecified);
labels are kept as given (only pixels are optimised); and phi is averaged over the canaries
rather than summed (the signed step ignores the scale).  Which records the proxy trains on
is the caller's choice (the workflow: ``deep.metagradient.base_from``, the public images or
the audited training's own non-canary records, as the paper).

Randomness is explicit and derived from the seed (:func:`subaudit.seeding.derive_seed`):
``(seed, "split", t)`` for the split, ``(seed, "base", t)`` for the base subset,
``(seed, "order", t)`` for the batches and ``(seed, "proxy-init", t)`` for the
initialisation; no global generator is read or set, so the same inputs and seed give the
same bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from subaudit.validation import ParameterError, check_choice, check_count, check_positive

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = ["HIDDEN", "MIN_SIDE", "PROXY_NETWORKS", "OptimisedCanaries", "Proxy", "ProxyNetwork", "metagradient",
           "optimise_canaries", "proxy_loss_gap", "split", "surrogate_objective"]

#: Units of the ``cnn`` proxy's hidden fully connected layer (as in Opacus' SampleConvNet).
HIDDEN = 32
#: The smallest image side the ``cnn`` proxy's two strided convolutions and pools accept.
MIN_SIDE = 14


@dataclass(frozen=True)
class Proxy:
    """The proxy network and its non-private training (stated in results)."""

    width: int = 8          # channels of the first conv layer (the network's others are multiples)
    steps: int = 40         # inner SGD steps per metastep
    batch: int = 128        # inner batch size (shuffled batches of base subset + C_in)
    lr: float = 0.5         # inner SGD learning rate (no momentum)
    base: int = 1024        # base (non-canary) records drawn per metastep from the pool given
    network: str = "cnn"    # a name of PROXY_NETWORKS

    def __post_init__(self) -> None:
        check_choice(self.network, "proxy.network", PROXY_NETWORKS)
        check_count(self.width, "proxy.width")
        check_count(self.steps, "proxy.steps")
        check_count(self.batch, "proxy.batch")
        check_positive(self.lr, "proxy.lr")
        check_count(self.base, "proxy.base")

    def describe(self) -> str:
        """One line: the architecture and the training."""
        return (f"{PROXY_NETWORKS[self.network].describe(self.width)}, {self.steps} SGD "
                f"steps of {self.batch} at lr {self.lr:g} on {self.base} records + C_in")

    @property
    def net(self) -> ProxyNetwork:
        """The registry entry of :attr:`network`."""
        return PROXY_NETWORKS[self.network]


@dataclass(frozen=True)
class OptimisedCanaries:
    """The canaries after optimisation and the objective along the way."""

    x: torch.Tensor               # (m, C, H, W) float32 in [0, 1]
    y: torch.Tensor               # (m,) int64 (labels are kept as given)
    objective: tuple[float, ...]  # phi at each metastep (mean over canaries), for the log


# --------------------------------------------------------------------------- the proxy networks


def _uniform(shape: tuple[int, ...], fan_in: int, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """PyTorch's default Conv2d/Linear init (uniform in +-1/sqrt(fan_in), what
    kaiming_uniform_(a=sqrt(5)) gives for weights) drawn from ``generator`` in float64."""
    import torch

    bound = 1.0 / math.sqrt(fan_in)
    u = torch.rand(shape, generator=generator, dtype=torch.float64)
    return ((2 * u - 1) * bound).to(dtype).requires_grad_(True)


def _cnn_side(n: int) -> int:
    """An image side after conv 8/2 pad 3, pool 2/1, conv 4/2, pool 2/1."""
    n = (n + 2 * 3 - 8) // 2 + 1 - 1
    return (n - 4) // 2 + 1 - 1


def _cnn_sides(n: int) -> tuple[int, int, int, int]:
    """An image side after each of conv 8/2 pad 3, pool 2/1, conv 4/2, pool 2/1."""
    a = (n + 2 * 3 - 8) // 2 + 1
    c = (a - 1 - 4) // 2 + 1
    return a, a - 1, c, c - 1


def _cnn_activations(shape: tuple[int, int, int], width: int) -> int:
    """Values the cnn proxy's forward makes per image (its layers' outputs)."""
    _, h, w = shape
    (a, b, c, d), (a2, b2, c2, d2) = _cnn_sides(h), _cnn_sides(w)
    return width * (a * a2 + b * b2) + 2 * width * (c * c2 + d * d2) + HIDDEN


def _cnn_macs(shape: tuple[int, int, int], width: int) -> int:
    """Multiply-accumulates of the cnn proxy's forward per image (10 classes)."""
    ch, h, w = shape
    (a, _, c, d), (a2, _, c2, d2) = _cnn_sides(h), _cnn_sides(w)
    return ch * 64 * width * a * a2 + width * 16 * 2 * width * c * c2 + 2 * width * d * d2 * HIDDEN + HIDDEN * 10


def _cnn_init(shape: tuple[int, int, int], classes: int, width: int, generator: torch.Generator,
              dtype: torch.dtype) -> list[torch.Tensor]:
    c, h, w = shape
    flat = 2 * width * _cnn_side(h) * _cnn_side(w)
    layers = [((width, c, 8, 8), c * 64), ((2 * width, width, 4, 4), width * 16),
              ((HIDDEN, flat), flat), ((classes, HIDDEN), HIDDEN)]
    return [_uniform(s, fan_in, generator, dtype) for weight_shape, fan_in in layers
            for s in (weight_shape, weight_shape[:1])]


def _cnn_forward(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    import torch
    import torch.nn.functional as F

    w1, b1, w2, b2, w3, b3, w4, b4 = params
    h = (x - 0.5) / 0.5
    h = F.max_pool2d(torch.tanh(F.conv2d(h, w1, b1, stride=2, padding=3)), 2, 1)
    h = F.max_pool2d(torch.tanh(F.conv2d(h, w2, b2, stride=2)), 2, 1)
    h = torch.tanh(F.linear(h.flatten(1), w3, b3))
    return F.linear(h, w4, b4)


def _resnet9_channels(c: int, width: int) -> list[tuple[int, int]]:
    """(in, out) channels of ResNet-9's eight 3x3 convolutions, in forward order."""
    w1, w2, w3, w4 = width, 2 * width, 4 * width, 8 * width
    return [(c, w1), (w1, w2), (w2, w2), (w2, w2), (w2, w3), (w3, w4), (w4, w4), (w4, w4)]


def _resnet9_sides(h: int, w: int) -> list[tuple[int, int]]:
    """The image side each of ResNet-9's eight convolutions computes at (pools after the 2nd,
    5th and 6th)."""
    return [(h, w), (h, w)] + [(h // 2, w // 2)] * 3 + [(h // 4, w // 4)] + [(h // 8, w // 8)] * 2


def _resnet9_activations(shape: tuple[int, int, int], width: int) -> int:
    """Values ResNet-9's convolutions output per image (each then normalised and rectified)."""
    c, h, w = shape
    return sum(cout * hs * ws for (_, cout), (hs, ws) in zip(_resnet9_channels(c, width), _resnet9_sides(h, w)))


def _resnet9_macs(shape: tuple[int, int, int], width: int) -> int:
    """Multiply-accumulates of ResNet-9's forward per image (its 3x3 convolutions)."""
    c, h, w = shape
    return sum(cin * cout * 9 * hs * ws for (cin, cout), (hs, ws) in zip(_resnet9_channels(c, width),
                                                                         _resnet9_sides(h, w)))


def _resnet9_init(shape: tuple[int, int, int], classes: int, width: int, generator: torch.Generator,
                  dtype: torch.dtype) -> list[torch.Tensor]:
    import torch

    params = []
    for cin, cout in _resnet9_channels(shape[0], width):
        params.append(_uniform((cout, cin, 3, 3), cin * 9, generator, dtype))
        params += [torch.ones(cout, dtype=dtype, requires_grad=True),
                   torch.zeros(cout, dtype=dtype, requires_grad=True)]
    return params + [_uniform(s, 8 * width, generator, dtype) for s in ((classes, 8 * width), (classes,))]


def _resnet9_forward(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    def conv(i: int, h: torch.Tensor) -> torch.Tensor:
        weight, scale, shift = params[3 * i: 3 * i + 3]
        h = F.conv2d(h, weight, padding=1)
        return F.relu(F.group_norm(h, math.gcd(h.shape[1], 16), scale, shift))

    h = conv(0, (x - 0.5) / 0.5)
    h = F.max_pool2d(conv(1, h), 2)
    h = h + conv(3, conv(2, h))
    h = F.max_pool2d(conv(4, h), 2)
    h = F.max_pool2d(conv(5, h), 2)
    h = h + conv(7, conv(6, h))
    return F.linear(h.amax(dim=(2, 3)), params[24], params[25]) * 0.125


@dataclass(frozen=True)
class ProxyNetwork:
    """A proxy network, functionally: ``init(shape, classes, width, generator, dtype)`` gives
    its parameter tensors (requiring grad), ``forward(params, x)`` its logits for images ``x``
    (B, C, H, W) in [0, 1]; ``min_side`` is the smallest image side it takes; ``describe(width)``
    names the architecture.  What crafting through it costs (the workflow's job resources,
    :func:`subaudit.pipeline.costs.canaries_job_resources`): ``activations(shape, width)`` and
    ``macs(shape, width)``, the values its forward makes and its multiply-accumulates per image,
    ``unroll_bytes``, the memory an inner step of the kept unroll holds per activation value
    (measured: the forward's outputs, their normalised and rectified copies and the graph the
    double backward needs), and ``macs_per_second``, the rate of a metastep (forward, backward
    and the double backward) in forward multiply-accumulates per second on the CPU at the
    crafting's two threads (measured, at the largest setting that fits a test)."""

    name: str
    init: Callable[..., list[torch.Tensor]]
    forward: Callable[[list[torch.Tensor], torch.Tensor], torch.Tensor]
    min_side: int
    describe: Callable[[int], str]
    activations: Callable[[tuple[int, int, int], int], int]
    macs: Callable[[tuple[int, int, int], int], int]
    unroll_bytes: float
    macs_per_second: float


#: The proxy networks by name (params.yaml ``deep.metagradient.network`` takes names from here).
#: Their crafting costs were measured on one x86-64 VM core pair (2026-11-29): one metastep's
#: peak memory over its start and its time, cnn at width 8-16, batch 32-64, 8-32 inner steps on
#: 28x28x1 and 32x32x3 images; ResNet-9 at width 8-32, batch 16-32, 4-16 steps (1.3 GB at width
#: 32, batch 32, 8 steps, within 5% of the model); tests/scenarios/test_canary_optimisation.py
#: measures one of each again.
PROXY_NETWORKS: dict[str, ProxyNetwork] = {n.name: n for n in (
    ProxyNetwork("cnn", _cnn_init, _cnn_forward, MIN_SIDE,
                 lambda w: f"CNN(conv {w}@8x8/2, conv {2 * w}@4x4/2, fc {HIDDEN})",
                 _cnn_activations, _cnn_macs, 16.0, 4.6e8),
    ProxyNetwork("resnet-9", _resnet9_init, _resnet9_forward, 8,
                 lambda w: f"ResNet-9(GroupNorm, {w}-{2 * w}-{4 * w}-{8 * w} channels)",
                 _resnet9_activations, _resnet9_macs, 28.0, 3.7e9),
)}


def _draws(seed: int, key: object, n_base: int, n_in: int, proxy: Proxy) -> tuple[np.ndarray, np.ndarray]:
    """The base subset (indices into the base records) and the inner batches (``proxy.steps``
    rows of ``proxy.batch`` indices into base subset + C_in: epochs of shuffles)."""
    import numpy as np

    from subaudit.seeding import generator

    base = generator(seed, "base", key).choice(n_base, proxy.base, replace=False)
    rng = generator(seed, "order", key)
    pool, need = proxy.base + n_in, proxy.steps * proxy.batch
    order = np.concatenate([rng.permutation(pool) for _ in range(-(-need // pool))])[:need]
    return base, order.reshape(proxy.steps, proxy.batch)


def _train(x_in: torch.Tensor, y_in: torch.Tensor, base_x: torch.Tensor, base_y: torch.Tensor, *,
           classes: int, proxy: Proxy, seed: int, key: object, graph: bool) -> list[torch.Tensor]:
    """Final proxy parameters after ``proxy.steps`` SGD steps on a base subset plus the
    records ``x_in``; with ``graph`` every step stays differentiable (in ``x_in`` too)."""
    import torch
    import torch.nn.functional as F

    from subaudit.seeding import derive_seed

    base, order = _draws(seed, key, base_x.shape[0], x_in.shape[0], proxy)
    base_t = torch.from_numpy(base)
    pool_x = torch.cat([base_x[base_t].to(x_in.dtype), x_in])
    pool_y = torch.cat([base_y[base_t], y_in])
    gen = torch.Generator().manual_seed(derive_seed(seed, "proxy-init", key))
    params = proxy.net.init(tuple(x_in.shape[1:]), classes, proxy.width, gen, x_in.dtype)
    if x_in.device.type != "cpu":       # drawn on the CPU from the seed, trained where the records are
        params = [p.detach().to(x_in.device).requires_grad_(True) for p in params]
    with torch.enable_grad():
        for idx in torch.from_numpy(order):
            loss = F.cross_entropy(proxy.net.forward(params, pool_x[idx]), pool_y[idx])
            grads = torch.autograd.grad(loss, params, create_graph=graph)
            params = [p - proxy.lr * g for p, g in zip(params, grads)]
            if not graph:
                params = [p.detach().requires_grad_(True) for p in params]
    return params


# --------------------------------------------------------------------------- validation


def _check(x: torch.Tensor, y: torch.Tensor, base_x: torch.Tensor, base_y: torch.Tensor, classes: int,
           proxy: Proxy) -> int:
    """Validate the inputs (ParameterError naming the key); returns ``classes``."""
    import torch

    classes = check_count(classes, "classes", 2)
    if not isinstance(proxy, Proxy):
        raise ParameterError("proxy", proxy, "a Proxy")
    for name, images in (("canaries", x), ("base_x", base_x)):
        if not isinstance(images, torch.Tensor) or images.ndim != 4 or not images.is_floating_point():
            raise ParameterError(name, getattr(images, "shape", images),
                                 "a floating tensor of images (N, C, H, W)")
        if min(images.shape[2:]) < proxy.net.min_side:
            raise ParameterError(name, tuple(images.shape),
                                 f"images of sides >= {proxy.net.min_side} (the {proxy.network} proxy)")
        if not bool(((images >= 0) & (images <= 1)).all()):
            raise ParameterError(name, "pixels outside [0, 1]", "pixels in [0, 1]")
    if x.shape[0] < 2:
        raise ParameterError("canaries", tuple(x.shape), "m >= 2 canaries")
    if base_x.shape[1:] != x.shape[1:]:
        raise ParameterError("base_x", tuple(base_x.shape), f"images of the canaries' shape {tuple(x.shape[1:])}")
    if base_x.shape[0] < proxy.base:
        raise ParameterError("base_x", base_x.shape[0], f"at least proxy.base = {proxy.base} records")
    for name, labels, n in (("canary_labels", y, x.shape[0]), ("base_y", base_y, base_x.shape[0])):
        if (not isinstance(labels, torch.Tensor) or labels.shape != (n,) or labels.is_floating_point()
                or labels.dtype == torch.bool):
            raise ParameterError(name, getattr(labels, "shape", labels), f"an integer tensor of shape ({n},)")
        if n and not bool(((labels >= 0) & (labels < classes)).all()):
            raise ParameterError(name, sorted(set(labels.tolist()))[:10], f"labels in 0..{classes - 1}")
    return classes


def _check_inside(inside: torch.Tensor, m: int) -> torch.Tensor:
    import torch

    if not isinstance(inside, torch.Tensor) or inside.dtype != torch.bool or inside.shape != (m,):
        raise ParameterError("inside", getattr(inside, "shape", inside), f"a bool tensor of shape ({m},)")
    if not 0 < int(inside.sum()) < m:
        raise ParameterError("inside", int(inside.sum()), f"between 1 and {m - 1} canaries inside")
    return inside


# --------------------------------------------------------------------------- the objective


def split(seed: int, step: int, m: int) -> torch.Tensor:
    """C_in of metastep ``step`` as a bool mask (m,): exactly m // 2 canaries, drawn from
    ``derive_seed(seed, "split", step)``."""
    import torch

    from subaudit.seeding import generator

    inside = torch.zeros(m, dtype=torch.bool)
    inside[torch.from_numpy(generator(seed, "split", step).choice(m, m // 2, replace=False))] = True
    return inside


def surrogate_objective(x: torch.Tensor, y: torch.Tensor, base_x: torch.Tensor, base_y: torch.Tensor, *,
                        classes: int, proxy: Proxy, seed: int, step: int) -> torch.Tensor:
    """phi of metastep ``step`` as a differentiable function of the canary pixels ``x``: the
    split, base subset, order and initialisation of that metastep; a proxy trained on the base
    subset plus C_in with every inner step in the graph; the mean over canaries of
    ``(1{in} - 1{out}) CE(w, z_i)``.  Computed in ``x``'s dtype (float64 for checks)."""
    import torch
    import torch.nn.functional as F

    _check(x, y, base_x, base_y, classes, proxy)
    y = y.long()
    inside = split(seed, step, x.shape[0])
    params = _train(x[inside], y[inside], base_x, base_y.long(), classes=classes, proxy=proxy, seed=seed,
                    key=step, graph=True)
    with torch.enable_grad():
        losses = F.cross_entropy(proxy.net.forward(params, x), y, reduction="none")
        sign = inside.to(device=x.device, dtype=x.dtype) * 2 - 1
        return (sign * losses).mean()


def metagradient(x: torch.Tensor, y: torch.Tensor, base_x: torch.Tensor, base_y: torch.Tensor, *,
                 classes: int, proxy: Proxy, seed: int, step: int) -> tuple[float, torch.Tensor]:
    """The single-metastep primitive of :func:`optimise_canaries`: phi of metastep ``step``
    (:func:`surrogate_objective`) at the canaries ``x`` and its total derivative with respect
    to their pixels (direct and through the unrolled training), of ``x``'s shape and dtype."""
    import torch

    xv = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        phi = surrogate_objective(xv, y, base_x, base_y, classes=classes, proxy=proxy, seed=seed, step=step)
        (grad,) = torch.autograd.grad(phi, xv)
    return float(phi.detach()), grad


def optimise_canaries(x: torch.Tensor, y: torch.Tensor, base_x: torch.Tensor, base_y: torch.Tensor, *,
                      classes: int, metasteps: int, canary_lr: float, proxy: Proxy = Proxy(), seed: int,
                      momentum: float = 0.9, progress: bool = False, device: str = "cpu") -> OptimisedCanaries:
    """Algorithm 5: ``metasteps`` signed metagradient steps of size ``canary_lr`` on the pixels
    of the canaries (x (m, C, H, W) in [0, 1], y (m,)), starting from ``x``, each on a fresh
    split, base subset, order and initialisation (:func:`metagradient` with ``step`` = t):
    ``v <- momentum v + grad``, ``x <- clamp(x - canary_lr sign(v), 0, 1)``; float32
    throughout.  ``base_x``/``base_y`` are the non-canary records the proxy trains on
    (``proxy.base`` of them drawn per metastep). ``device``: where the proxies train (the
    draws stay the CPU's; a GPU gives other bits); the canaries come back on the CPU."""
    import torch
    from tqdm.auto import tqdm

    _check(x, y, base_x, base_y, classes, proxy)
    metasteps = check_count(metasteps, "metasteps")
    canary_lr = check_positive(canary_lr, "canary_lr")
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0.0 <= momentum < 1.0:
        raise ParameterError("momentum", momentum, "a number in [0, 1)")
    current = x.detach().to(device=device, dtype=torch.float32).clone()
    base_x = base_x.detach().to(device=device, dtype=torch.float32)
    y, base_y = y.to(device), base_y.to(device)
    velocity = torch.zeros_like(current)
    history = []
    bar = tqdm(range(metasteps), desc="canary metasteps", unit="metastep", disable=not progress)
    for t in bar:
        phi, grad = metagradient(current, y, base_x, base_y, classes=classes, proxy=proxy, seed=seed, step=t)
        velocity = momentum * velocity + grad
        current = (current - canary_lr * torch.sign(velocity)).clamp_(0.0, 1.0)
        history.append(phi)
        bar.set_postfix(phi=f"{phi:.3f}")
    return OptimisedCanaries(current.cpu(), y.detach().long().cpu().clone(), tuple(history))


def proxy_loss_gap(x: torch.Tensor, y: torch.Tensor, base_x: torch.Tensor, base_y: torch.Tensor, *,
                   classes: int, proxy: Proxy, seed: int, inside: torch.Tensor) -> float:
    """Trains one proxy (no graph) on a base subset plus the canaries where ``inside`` is True
    (its base subset, order and initialisation from ``seed``) and returns the mean
    cross-entropy on the outside canaries minus that on the inside ones (larger: better
    canaries)."""
    import torch
    import torch.nn.functional as F

    _check(x, y, base_x, base_y, classes, proxy)
    inside = _check_inside(inside, x.shape[0])
    x, y = x.detach().to(torch.float32), y.long()
    params = _train(x[inside], y[inside], base_x.detach().to(torch.float32), base_y.long(), classes=classes,
                    proxy=proxy, seed=seed, key="gap", graph=False)
    with torch.no_grad():
        losses = F.cross_entropy(proxy.net.forward(params, x), y, reduction="none")
    return float(losses[~inside].mean() - losses[inside].mean())
