"""subaudit.devices: the numerics settings that make float32 CPU work processor-independent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from subaudit.devices import NUMERICS_ENV, machine_independent_numerics

#: md5s of three float32 computations the outputs depend on (shared/cross-machine/digests.py:
#: EfficientNet-Lite0 features of 200 seeded 28x28 images at 224 px, MiniLM-L6 features of 200
#: seeded sentences, a 20-step Opacus DP-SGD training of a small CNN; one thread, torch 2.13.0+cpu)
#: under NUMERICS_ENV, measured on an Intel Xeon (Emerald Rapids) and on an AMD EPYC, both AVX-512:
#: equal there. Without it the two machines differ in all three (by default MKL takes AVX-512
#: paths on the Intel processor and AVX2 ones on the AMD).
CROSS_MACHINE = {"image_features": "e9ba6fce176d6138c31f22bdd2a66414",
                 "text_features": "1b6a51b8af4b19e1f3cdfa353f1b36a7",
                 "opacus_training": "4e1b31d6bfc0197cced69d5c092ecd6d"}

_DIGESTS = r'''
import hashlib, json
from subaudit.devices import machine_independent_numerics
machine_independent_numerics()              # before torch (and MKL) loads, as the Snakefile does
import numpy as np
import torch
torch.set_num_threads(1)

def md5(a):
    return hashlib.md5(np.ascontiguousarray(np.asarray(a, dtype=np.float32)).tobytes()).hexdigest()

from subaudit.data.features import image_features, text_features
g = np.random.default_rng(0)
x = g.integers(0, 256, size=(200, 28, 28), dtype=np.uint8)
out = {"image_features": md5(image_features(x, "efficientnet-lite0", resolution=224, device="cpu", progress=False))}
g = np.random.default_rng(1)
words = "the a film movie was is not very good bad great plot actor story dull fine".split()
texts = [" ".join(g.choice(words, size=12)) for _ in range(200)]
out["text_features"] = md5(text_features(texts, "minilm-l6-v2", device="cpu", progress=False))

from opacus import PrivacyEngine
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 16, 8, 2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
                      nn.Conv2d(16, 32, 4, 2), nn.Tanh(), nn.MaxPool2d(2, 1), nn.Flatten(),
                      nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))
g = torch.Generator().manual_seed(1)
x = torch.rand(512, 1, 28, 28, generator=g)
y = torch.randint(0, 10, (512,), generator=g)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
model, opt, loader = PrivacyEngine().make_private(
    module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0,
    poisson_sampling=True, noise_generator=torch.Generator().manual_seed(2))
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
out["opacus_training"] = md5(torch.cat([p.detach().flatten() for p in model.parameters()]).numpy())
print(json.dumps(out))
'''


def test_machine_independent_numerics_sets_its_values_and_names_what_it_replaced():
    env = {"MKL_CBWR": "AVX2", "OTHER": "1"}
    assert machine_independent_numerics(env) == {"MKL_CBWR": "AVX2"}
    assert env == {**NUMERICS_ENV, "OTHER": "1"}
    assert machine_independent_numerics(env) == {}          # already set: nothing replaced
    fresh: dict[str, str] = {}
    assert machine_independent_numerics(fresh) == {} and fresh == NUMERICS_ENV


def test_under_the_numerics_settings_this_machine_computes_the_cross_machine_bits():
    """The digests measured equal on an Intel and an AMD processor under NUMERICS_ENV: this
    machine gives them too (a processor whose MKL path the setting does not pin fails here)."""
    env = {k: v for k, v in os.environ.items() if k not in NUMERICS_ENV}
    proc = subprocess.run([sys.executable, "-c", _DIGESTS], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == CROSS_MACHINE
