"""Seeds derived from names, so a job's randomness depends only on what it computes.

A run's numbers are a function of (root seed, what is being simulated, its
coordinates), never of the job order, the shard layout or the process.
"""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(root: int, *keys: object) -> int:
    """A 63-bit seed from the root seed and any printable keys (stable across runs)."""
    text = "\x1f".join([str(int(root)), *(repr(k) if not isinstance(k, str) else k for k in keys)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def generator(root: int, *keys: object) -> np.random.Generator:
    """A numpy Generator seeded by :func:`derive_seed`."""
    return np.random.default_rng(derive_seed(root, *keys))
