"""Without the compiled kernels (no C++ compiler, or ``SUBAUDIT_KERNELS=none``) the engine trains
through torch and draws from the numpy twin of the kernels' generator: the same random
numbers, scores equal to float rounding, the same audit numbers at their printed precision,
on the workloads of the default run (short T)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from subaudit.engine import kernels


#: Trains the default run's workloads (``subaudit.engine.bench.WORKLOADS``, role "default") for
#: a few steps with an input canary and records the draws of a few streams, in this process's
#: mode (compiled kernels or not).
_SCRIPT = r"""
import sys
import numpy as np
import torch
torch.set_num_threads(1)
from subaudit.engine import DPConfig, InputCanary, MLP, Records, RunStreams, train, kernels
from subaudit.engine.bench import WORKLOADS
from subaudit.estimation import estimate_over_steps

out = {"compiled": np.array(kernels.available())}
g = torch.Generator().manual_seed(0)
for i, w in enumerate(x for x in WORKLOADS if x.role == "default"):
    d, K = w.sizes[0], w.sizes[-1]
    if len(w.sizes) > 2:                        # the tabular MLP's one-hot attributes
        x = torch.zeros(w.n + 2, d)
        x[torch.arange(w.n + 2)[:, None], torch.randint(0, 16, (w.n + 2, d // 16), generator=g)
          + 16 * torch.arange(d // 16)] = 1.0
    else:
        x = torch.randn(w.n + 2, d, generator=g)
    y = torch.randint(0, K, (w.n + 2,), generator=g)
    canary = InputCanary(x[-2:], y[-2:])
    dp = DPConfig(steps=8, sampling_rate=w.q, noise_multiplier=0.8, clip=2.0,
                  lr=0.01 if w.optimizer == "adam" else 0.05, optimizer=w.optimizer)
    runs = np.arange(96)
    res = train(MLP(w.sizes), Records(x[:-2], y[:-2]), canary, dp, seed=11, runs=runs, bits=runs % 2,
                score_every=4, init=w.init, progress=False)
    out[f"scores{i}"] = res.scores
    out[f"eps{i}"] = np.array([e.epsilon for e in estimate_over_steps(res.scores, res.bits, delta=1e-5)])
streams = RunStreams.for_runs(5, range(3))
u, z, z64 = torch.empty(3, 1001), torch.empty(3, 36224), torch.empty(3, 77, dtype=torch.float64)
for _ in range(2):
    streams[0].block.uniform(0, u)
    streams[0].block.normal(1, z)
    streams[0].block.normal(1, z64)
out.update(uniforms=u.numpy(), normals=z.numpy(), normals64=z64.numpy(), state=streams[0].block.state)
np.savez(sys.argv[1], **out)
"""


def _run(tmp_path, mode: str) -> dict[str, np.ndarray]:
    env = dict(os.environ)
    env.pop("SUBAUDIT_KERNELS", None)
    if mode == "none":
        env["SUBAUDIT_KERNELS"] = "none"
    path = tmp_path / f"{mode}.npz"
    subprocess.run([sys.executable, "-c", _SCRIPT, str(path)], check=True, env=env, timeout=900)
    return dict(np.load(path))


@pytest.mark.skipif(not kernels.available(), reason="needs the compiled kernels to compare with")
def test_without_the_kernels_the_draws_scores_and_audits_are_the_same(tmp_path):
    compiled, fallback = _run(tmp_path, "compiled"), _run(tmp_path, "none")
    assert bool(compiled["compiled"]) and not bool(fallback["compiled"])
    for key in ("uniforms", "normals", "normals64", "state"):           # the same random numbers
        assert np.array_equal(compiled[key], fallback[key]), key
    n = sum(k.startswith("scores") for k in compiled)
    assert n == 7
    for i in range(n):
        a, b = compiled[f"scores{i}"], fallback[f"scores{i}"]
        scale = np.abs(a).max()
        np.testing.assert_allclose(b, a, rtol=0, atol=2e-5 * scale, err_msg=f"workload {i}")
        assert not np.array_equal(a[-1], a[0])                          # training moved the scores
        # the audits (auc estimator at each checkpoint) as the report prints them
        assert np.array_equal(np.round(compiled[f"eps{i}"], 2), np.round(fallback[f"eps{i}"], 2)), i


def test_the_package_builds_without_a_compiler(tmp_path):
    """The kernels are optional extensions: with no C++ compiler the package still builds (a
    wheel without them), and the engine then runs as above."""
    import shutil
    import zipfile

    root = Path(__file__).resolve().parents[2]
    tree = tmp_path / "tree"
    shutil.copytree(root / "src", tree / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(root / name, tree / name)
    env = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false"}
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "wheel"), str(tree)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "wheel").glob("subaudit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "subaudit/engine/generator.py" in names and not any(n.endswith(".so") for n in names)
