"""Networks the deep-network audits train with Opacus (a registry, :data:`NETWORKS`).

``sample-convnet``
    Opacus' MNIST example network (``examples/mnist.py``, SampleConvNet): two tanh
    convolutions with max-pooling and two linear layers, 26,010 parameters on 28x28 grey
    images. Input normalisation ``(x - 0.5) / 0.5`` is part of the forward.
``wrn-16-4``
    The Wide ResNet 16-4 of De et al. 2022 as the canary-optimisation paper audits it:
    GroupNorm (16 groups) instead of BatchNorm, which DP-SGD cannot use, and no dropout;
    2.75M parameters on 32x32 RGB images.

Both take images in [0, 1] shaped (N, C, H, W). Adding a network is a constructor and an
entry.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from subaudit.validation import check_choice

__all__ = ["NETWORKS", "SampleConvNet", "WideResNet", "build", "parameter_count"]


class _MaxPool2x2(torch.autograd.Function):
    """``F.max_pool2d(x, 2, 1)`` of a CPU tensor, value for value and gradient for gradient,
    about twice as fast: torch's channels-last kernel scans each window as its NCHW kernel
    does (rows, then columns; the first maximum, NaN taken), so it finds the same indices, and
    the gradient is torch's own ``max_pool2d_with_indices_backward`` with them (tested equal
    bit for bit, ties included)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y, idx = torch.ops.aten.max_pool2d_with_indices(x.contiguous(memory_format=torch.channels_last),
                                                        [2, 2], [1, 1])
        ctx.save_for_backward(x, idx.contiguous())
        return y.contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        x, idx = ctx.saved_tensors
        return torch.ops.aten.max_pool2d_with_indices_backward(grad.contiguous(), x, [2, 2], [1, 1], [0, 0],
                                                               [1, 1], False, idx)


def max_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """``F.max_pool2d(x, 2, 1)``: on the CPU through :class:`_MaxPool2x2`, the same numbers
    (torch's NCHW kernel spends a quarter of a small CNN's DP step here)."""
    if x.device.type != "cpu" or x.dim() != 4:
        return F.max_pool2d(x, 2, 1)
    return _MaxPool2x2.apply(x)


class SampleConvNet(nn.Module):
    """Opacus' MNIST example CNN, for ``channels`` x ``size`` x ``size`` inputs."""

    def __init__(self, classes: int = 10, channels: int = 1, size: int = 28) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 8, 2, padding=3)
        self.conv2 = nn.Conv2d(16, 32, 4, 2)
        side = ((size + 6 - 8) // 2 + 1 - 1 - 4) // 2 + 1 - 1
        self.fc1 = nn.Linear(32 * side * side, 32)
        self.fc2 = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x - 0.5) / 0.5
        x = max_pool_2x2(torch.tanh(self.conv1(x)))
        x = max_pool_2x2(torch.tanh(self.conv2(x)))
        return self.fc2(torch.tanh(self.fc1(x.flatten(1))))


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(16, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm2 = nn.GroupNorm(16, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.skip = None if cin == cout and stride == 1 else nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norm1(x))
        out = self.conv2(F.relu(self.norm2(self.conv1(h))))
        return out + (x if self.skip is None else self.skip(h))


class WideResNet(nn.Module):
    """WRN-``depth``-``width`` with GroupNorm (De et al. 2022)."""

    def __init__(self, classes: int = 10, channels: int = 3, size: int = 32, depth: int = 16,
                 width: int = 4) -> None:
        super().__init__()
        del size  # global pooling: any input size
        n = (depth - 4) // 6
        widths = [16, 16 * width, 32 * width, 64 * width]
        self.stem = nn.Conv2d(channels, widths[0], 3, 1, 1, bias=False)
        layers: list[nn.Module] = []
        for group in range(3):
            for k in range(n):
                layers.append(_Block(widths[group] if k == 0 else widths[group + 1], widths[group + 1],
                                     (1 if group == 0 else 2) if k == 0 else 1))
        self.blocks = nn.Sequential(*layers)
        self.norm = nn.GroupNorm(16, widths[3])
        self.fc = nn.Linear(widths[3], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.blocks(self.stem((x - 0.5) / 0.5))
        return self.fc(F.relu(self.norm(h)).mean(dim=(2, 3)))


#: Network constructors by name: ``(classes, channels, size) -> nn.Module``.
NETWORKS: dict[str, Callable[..., nn.Module]] = {
    "sample-convnet": SampleConvNet,
    "wrn-16-4": WideResNet,
}


def build(name: str, *, classes: int, channels: int, size: int, seed: int) -> nn.Module:
    """Network ``name`` initialised from ``seed`` (PyTorch's default initialisation)."""
    constructor = NETWORKS[check_choice(name, "network", NETWORKS)]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return constructor(classes=classes, channels=channels, size=size)


def parameter_count(model: nn.Module) -> int:
    """Trainable parameters of ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
