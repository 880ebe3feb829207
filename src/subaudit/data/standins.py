"""Synthetic stand-ins: archives written by code, in a real source's format, for rehearsals.

A stand-in lets a configuration take a paper source's path through the workflow (its loader, its
shapes, the networks built for them) on a machine that cannot fetch it: the rehearsal of the
paper preset (``presets/rehearsal.yaml``) runs the deep phase's WRN-16-4 and ResNet-9 on
``cifar10-shaped`` images. Its audits say nothing about the real data.

Each generator writes the archive's bytes from a fixed seed, deterministically (plain pickles of
byte rows, an uncompressed tar with fixed headers), so that the archive has a digest pinned in
:data:`~subaudit.data.sources.SOURCES` and is verified like a download.
:data:`GENERATORS` is the registry a source of kind ``"synthetic"`` names in its ``locations``.
"""

from __future__ import annotations

import io
import pickle
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["CIFAR10_SHAPED_PER_BATCH", "GENERATORS", "write_cifar10_shaped"]

#: Images per member of ``cifar10-shaped`` (six members: five training batches, one test batch).
CIFAR10_SHAPED_PER_BATCH = 1000


def _cifar10_shaped_images(rng: np.random.Generator, labels: np.ndarray, templates: np.ndarray) -> np.ndarray:
    """(N, 3072) uint8 rows in CIFAR-10's channel-major layout: each image its class's smooth
    colour template (8 x 8 upsampled to 32 x 32), shifted by up to 2 pixels, plus pixel noise."""
    n = len(labels)
    images = np.repeat(np.repeat(templates[labels], 4, axis=2), 4, axis=3)           # (N, 3, 32, 32)
    shifts = rng.integers(-2, 3, size=(n, 2))
    for i, (dy, dx) in enumerate(shifts):
        images[i] = np.roll(images[i], (int(dy), int(dx)), axis=(1, 2))
    noisy = images + rng.normal(0.0, 40.0, size=images.shape)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8).reshape(n, 3072)


def write_cifar10_shaped(path: Path, members: tuple[str, ...]) -> None:
    """A CIFAR-10-format tar (``members``: the pickled batches, as CIFAR-10's) of
    ``CIFAR10_SHAPED_PER_BATCH`` 32 x 32 RGB images per member in 10 balanced classes."""
    rng = np.random.default_rng(20261129)
    templates = rng.uniform(20.0, 235.0, size=(10, 3, 8, 8))
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for member in members:
            labels = rng.permutation(np.arange(CIFAR10_SHAPED_PER_BATCH) % 10)
            rows = _cifar10_shaped_images(rng, labels, templates)
            # bytearrays and ints only: their protocol-5 pickle adds nothing that depends on the
            # Python or numpy version (an ndarray's pickle names numpy's internals); the draws are
            # numpy's PCG64 Generator's, which the pinned digest holds to (a test acquires it)
            batch = {b"data": [bytearray(r.tobytes()) for r in rows], b"labels": [int(v) for v in labels]}
            payload = pickle.dumps(batch, protocol=5)
            info = tarfile.TarInfo(member)
            info.size, info.mtime, info.mode = len(payload), 0, 0o644
            tf.addfile(info, io.BytesIO(payload))


GENERATORS: dict[str, Callable[[Path, tuple[str, ...]], None]] = {
    "cifar10-shaped": write_cifar10_shaped,
}
