"""Tests for subaudit.pipeline.numerics: the workflow's jobs run on code paths that give the
same float32 bits on every x86-64 machine with AVX2, where a setting can make them so.

``test_the_portable_computations_give_the_reference_machines_bits`` pins the bits of the three
computations the portable jobs run (backbone features of images and of texts, an Opacus
DP-SGD training), measured on the reference machine (an Intel Xeon, Emerald Rapids, AVX-512,
whose digests under the cross-machine settings equal those of ``../shared/cross-machine``).
On this machine kind it fails when the environment stops pinning a path; on any other x86-64
machine (an AMD EPYC, an AVX2-only Xeon) it is the cross-machine check itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from subaudit.pipeline import numerics

DIGESTS = r'''
import hashlib, json
import numpy as np
import torch
from subaudit.data.features import image_features, text_features
from subaudit.pipeline import numerics

torch.set_num_threads(1)


def md5(a):
    return hashlib.md5(np.ascontiguousarray(np.asarray(a, dtype=np.float32)).tobytes()).hexdigest()


def opacus_training():
    from opacus import PrivacyEngine
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 16, 8, 2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
                          nn.Conv2d(16, 32, 4, 2), nn.Tanh(), nn.MaxPool2d(2, 1), nn.Flatten(),
                          nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))
    g = torch.Generator().manual_seed(1)
    x, y = torch.rand(512, 1, 28, 28, generator=g), torch.randint(0, 10, (512,), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64)
    model, opt, loader = PrivacyEngine().make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5), data_loader=loader,
        noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=True,
        noise_generator=torch.Generator().manual_seed(2))
    loader.batch_sampler.generator = torch.Generator().manual_seed(3)
    steps = 0
    while steps < 20:
        for xb, yb in loader:
            if len(yb) == 0:
                continue
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            steps += 1
            if steps == 20:
                break
    return md5(torch.cat([p.detach().flatten() for p in model.parameters()]))


images = np.random.default_rng(0).integers(0, 256, size=(200, 28, 28), dtype=np.uint8)
g = np.random.default_rng(1)
words = "the a film movie was is not very good bad great plot actor story dull fine".split()
texts = [" ".join(g.choice(words, size=12)) for _ in range(200)]
cpu = torch.device("cpu")
print(json.dumps({"mkl": numerics.mkl_branch(),
                  "image": md5(image_features(images, "efficientnet-lite0", resolution=224, device=cpu,
                                              weights_checksum=None)),
                  "text": md5(text_features(texts, "minilm-l6-v2", device=cpu)),
                  "opacus": opacus_training()}))
'''

#: Measured on the reference machine under PINNED and PORTABLE (see the module docstring); the
#: computations are ``../shared/cross-machine/digests.py``'s, whose image digest there under
#: MKL_CBWR=COMPATIBLE alone is this one too (the pins below MKL do not touch that network).
REFERENCE = {"mkl": "COMPATIBLE", "image": "e9ba6fce176d6138c31f22bdd2a66414",
             "text": "85a129d3a28d46cb40cc49405c28b35a", "opacus": "65e9dec85e396e72db7f0009f318e1e7"}


def run(env: dict[str, str]) -> dict[str, str]:
    proc = subprocess.run([sys.executable, "-c", DIGESTS], capture_output=True, text=True,
                          env={**{k: v for k, v in os.environ.items() if k not in (*numerics.PINNED,
                                                                                    *numerics.PORTABLE)},
                               **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_portable_computations_give_the_reference_machines_bits():
    assert run({**numerics.PINNED, **numerics.PORTABLE}) == REFERENCE


def test_apply_pins_every_path_and_says_what_it_replaced():
    env = {"ATEN_CPU_CAPABILITY": "avx512", "OPENBLAS_CORETYPE": "Haswell", "PATH": "/bin"}
    assert numerics.apply(env) == {"ATEN_CPU_CAPABILITY": "avx512"}
    assert env == {**numerics.PINNED, "PATH": "/bin"}
    assert numerics.apply(env) == {}


def test_mkl_branch_is_the_one_the_process_started_under():
    code = "from subaudit.pipeline import numerics; print(numerics.mkl_branch())"
    for env, branch in (({}, "AUTO"), (dict(numerics.PORTABLE), "COMPATIBLE")):
        clean = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env})
        assert proc.stdout.strip() == branch, proc.stderr
