"""The GPU's random streams (:mod:`subaudit.engine.device_streams`) draw the CPU kernels' numbers.

The Triton kernels run here in Triton's interpreter (the same kernel bodies a GPU compiles), and
are compiled for two GPU architectures to show that a GPU accepts them.  The engine's GPU code
path runs on the CPU under ``SUBAUDIT_STREAMS=device``: there its generator launches per step
are counted for two numbers of runs, and its scores compared with the CPU's.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("triton")

from subaudit.engine.device_streams import CopiedStreamBlock, DeviceStreamBlock  # noqa: E402
from subaudit.engine.streams import new_block  # noqa: E402
from subaudit.engine.ziggurat_tables import R as ZIG_R  # noqa: E402

SEEDS = [[[3 + r, 7_000 + 13 * r] for r in range(3)], [[2**63 + 5 * r, 2**40 - r] for r in range(2)]]


def _blocks(seeds):
    """The CPU's block (compiled kernels, or their numpy twin) and the device kernels' on the CPU."""
    return new_block(seeds), DeviceStreamBlock(seeds, "cpu")


def _state(block) -> np.ndarray:
    s = block.state
    return (s.numpy() if isinstance(s, torch.Tensor) else s).view(np.int64)


@pytest.mark.parametrize("seeds", SEEDS)
def test_uniforms_are_the_kernels_bit_for_bit(seeds):
    cpu, dev = _blocks(seeds)
    assert np.array_equal(_state(cpu), _state(dev))
    R = len(seeds)
    for n in (1, 2, 3, 4, 5, 7, 64, 1001):
        assert torch.equal(cpu.uniform(0, torch.empty(R, n)), dev.uniform(0, torch.empty(R, n))), n
    a, b = torch.zeros(R - 1, 9), torch.zeros(R - 1, 9)     # some rows only
    assert torch.equal(cpu.uniform(0, a, slice(1, R)), dev.uniform(0, b, slice(1, R)))
    assert np.array_equal(_state(cpu), _state(dev))
    assert dev.launches == 9


@pytest.mark.parametrize("seeds", SEEDS)
def test_normals_are_the_kernels_including_the_slow_path_and_the_tail(seeds):
    """float32 draws bit for bit; float64 draws bit for bit but for tail values (beyond R, the
    device's log against the C library's log1p), there within 2 ulp; the streams' states equal
    after every draw (the same integers consumed, rejections and tails included)."""
    cpu, dev = _blocks(seeds)
    R = len(seeds)
    tails = 0
    for n, dtype in ((1, torch.float32), (6, torch.float64), (3001, torch.float32),
                     (2003, torch.float64), (4002, torch.float32)):
        a = cpu.normal(1, torch.empty(R, n, dtype=dtype))
        b = dev.normal(1, torch.empty(R, n, dtype=dtype))
        differ = a != b
        if dtype == torch.float32:
            assert not differ.any(), (n, a[differ], b[differ])
        else:
            assert (a[differ].abs() > ZIG_R).all()
            assert torch.allclose(a, b, rtol=4.5e-16, atol=0)
        tails += int((a.abs() > ZIG_R).sum())
        assert np.array_equal(_state(cpu), _state(dev)), n
    assert tails >= 2           # the tail's loop ran (about 3 values in 10,000)
    a, b = cpu.normal(1, torch.empty(2, 77), slice(0, 2)), dev.normal(1, torch.empty(2, 77), slice(0, 2))
    assert torch.equal(a, b)
    assert np.array_equal(_state(cpu), _state(dev))


def test_a_runs_draws_are_the_same_alone_or_in_a_block():
    seeds = SEEDS[0]
    together = DeviceStreamBlock(seeds, "cpu")
    z = together.normal(1, torch.empty(3, 300))
    u = together.uniform(0, torch.empty(3, 41))
    for r in range(3):
        alone = DeviceStreamBlock([seeds[r]], "cpu")
        assert torch.equal(alone.normal(1, torch.empty(1, 300))[0], z[r])
        assert torch.equal(alone.uniform(0, torch.empty(1, 41))[0], u[r])


def test_the_copied_streams_are_the_cpus():
    seeds = SEEDS[0]
    cpu, copied = new_block(seeds), CopiedStreamBlock(new_block(seeds), "cpu")
    assert torch.equal(cpu.normal(1, torch.empty(3, 500)), copied.normal(1, torch.empty(3, 500)))
    assert torch.equal(cpu.uniform(0, torch.empty(3, 9)), copied.uniform(0, torch.empty(3, 9)))
    assert np.array_equal(_state(cpu), _state(copied))


def test_bad_destinations_are_refused():
    dev = DeviceStreamBlock(SEEDS[0], "cpu")
    with pytest.raises(ValueError, match="float32"):
        dev.uniform(0, torch.empty(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="contiguous"):
        dev.normal(1, torch.empty(4, 3).t())
    with pytest.raises(ValueError, match="float32 or float64"):
        dev.normal(1, torch.empty(3, 4, dtype=torch.float16))


@pytest.mark.parametrize("arch", [80, 90])
def test_the_kernels_compile_for_a_gpu_without_fused_multiply_adds(arch):
    """Both kernels compile to a cubin for sm_80 and sm_90 (no GPU needed), and switching fp
    fusion off (as the launches do) leaves fewer fused multiply-adds than on: the wedge's test
    is computed as the C++ does, a product then a sum."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from subaudit.engine import device_kernels as body

    common = {"state": "*i64", "stride": "i32", "out": "*fp32", "rows": "i32", "n": "i32"}
    tables = {"ki": "*i64", "wi": "*fp64", "fi": "*fp64", "consts": "*fp64"}
    fmas = {}
    for name, sig in (("uniform_body", common), ("normal_body", {**common, **tables})):
        for fuse in (False, True):
            src = ASTSource(fn=triton.jit(getattr(body, name)), signature={**sig, "BLOCK": "constexpr"},
                            constexprs={"BLOCK": 64})
            compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"enable_fp_fusion": fuse})
            assert len(compiled.asm["cubin"]) > 1000
            fmas[name, fuse] = compiled.asm["ptx"].count("fma.rn.f64")
    assert fmas["uniform_body", False] == 0
    assert fmas["normal_body", False] < fmas["normal_body", True]


_GPU_PATH = r"""
import sys
import numpy as np
import torch
from subaudit.engine import DPConfig, InputCanary, MLP, Records, kernels, train
from subaudit.engine import device_streams
from subaudit.engine.streams import RunStreams

g = torch.Generator().manual_seed(0)
x, y = torch.randn(42, 6, generator=g), torch.randint(0, 3, (42,), generator=g)
canary = InputCanary(x[-2:], y[-2:])
dp = DPConfig(steps=4, sampling_rate=0.3, noise_multiplier=0.9, clip=1.0, lr=0.1)
out = {"kernels": np.array(kernels.available()),
       "block": np.array(type(RunStreams.for_runs(1, range(2))[0].block).__name__)}
for runs in (2, 9):
    before = device_streams.launches()
    res = train(MLP((6, 5, 3)), Records(x[:-2], y[:-2]), canary, dp, seed=3, runs=np.arange(runs),
                bits=np.arange(runs) % 2, score_every=2, init="random", progress=False)
    out[f"launches{runs}"] = np.array(device_streams.launches() - before)
    out[f"scores{runs}"] = res.scores
np.savez(sys.argv[1], **out)
"""


def _gpu_path(tmp_path, mode: str) -> dict[str, np.ndarray]:
    env = {k: v for k, v in os.environ.items() if k not in ("SUBAUDIT_KERNELS", "SUBAUDIT_STREAMS")}
    env.update({"device": {"SUBAUDIT_STREAMS": "device"}, "none": {"SUBAUDIT_KERNELS": "none"}, "cpu": {}}[mode])
    path = tmp_path / f"{mode}.npz"
    subprocess.run([sys.executable, "-c", _GPU_PATH, str(path)], check=True, env=env, timeout=600)
    return dict(np.load(path))


def test_the_gpu_path_draws_in_two_launches_a_step_whatever_the_runs_and_scores_as_the_cpu(tmp_path):
    """On the GPU's code path (torch training, the device kernels) a step's draws are two
    launches (uniforms, noise) for 2 runs as for 9; its scores equal the same torch path's with
    the numpy twin's draws bit for bit, and the compiled kernels' to float rounding."""
    device, twin, cpu = (_gpu_path(tmp_path, m) for m in ("device", "none", "cpu"))
    assert str(device["block"]) == "DeviceStreamBlock" and not bool(device["kernels"])
    assert str(twin["block"]) == "NumpyStreamBlock"
    assert int(device["launches2"]) == int(device["launches9"]) == 2 * 4
    assert int(twin["launches9"]) == 0
    for runs in (2, 9):
        assert np.array_equal(device[f"scores{runs}"], twin[f"scores{runs}"])
        np.testing.assert_allclose(device[f"scores{runs}"], cpu[f"scores{runs}"], rtol=1e-5, atol=1e-6)


_NO_TRITON = r"""
import sys, warnings
sys.modules["triton"] = None          # as where Triton is not installed
import torch
from subaudit.engine.streams import new_block
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    block = new_block([[1, 2]], "meta")
print(type(block).__name__, "|", caught[0].message)
"""


def test_without_triton_a_device_draws_on_the_cpu_with_a_message():
    done = subprocess.run([sys.executable, "-c", _NO_TRITON], capture_output=True, text=True, check=True)
    name, message = done.stdout.strip().split(" | ")
    assert name == "CopiedStreamBlock"
    assert "Triton is not available" in message and "the same numbers, slower" in message


_BENCH = r"""
from subaudit.engine.bench import Workload, draw_seconds
w = Workload("tiny", (6, 3), 20, 0.5, "sgd", "zero", 4, 2, 2, "goal", "full")
counts = [draw_seconds(w, None, 3, runs, "cpu")[1] for runs in (2, 7)]
print(*counts)
"""


def test_the_bench_counts_the_devices_generator_launches_per_step():
    env = {**os.environ, "SUBAUDIT_STREAMS": "device"}
    done = subprocess.run([sys.executable, "-c", _BENCH], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.split() == ["2.0", "2.0"]
