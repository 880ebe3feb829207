"""The numpy twin of the kernels' generator (:mod:`subaudit.engine.generator`): the compiled
:class:`kernels.CompiledStreamBlock`'s draws and states, bit for bit (seeds, runs, sizes, row slices,
float32 and float64, consecutive calls, the slow path and the tail many times over), its
tables the script's, and known answers that hold on a machine without the compiled library."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from subaudit.engine import generator, kernels
from subaudit.engine.generator import NumpyStreamBlock, draw_only

ROOT = Path(__file__).resolve().parents[2]
TAIL = 3.6541528853610088


def _compiled() -> bool:
    try:
        kernels.library()
    except ImportError:
        return False
    return True


needs_compiled = pytest.mark.skipif(not _compiled(), reason="the compiled kernels are not built here")


def _seeds(runs: int, purposes: int, base: int) -> list[list[int]]:
    return [[base + 7919 * r + 104729 * k for k in range(purposes)] for r in range(runs)]


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.numpy().view(np.uint8)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(_bits(a), _bits(b))


def _draw(block, kind: str, purpose: int, runs: int, n: int, rows: slice = slice(None)) -> torch.Tensor:
    dtype = torch.float64 if kind == "f64" else torch.float32
    out = torch.empty(runs, n, dtype=dtype)
    (block.uniform if kind == "uniform" else block.normal)(purpose, out, rows)
    return out


class _SlowCounter:
    """Counts what ``generator._slow`` saw (every candidate, also those a slow draw before
    consumed or a later block looks at again): slow draws, rejections in a layer, tail draws."""

    def __init__(self, monkeypatch) -> None:
        self.candidates = self.rejected = self.tail = 0
        inner = generator._slow

        def counting(raw, W, pos, *args):
            val, end = inner(raw, W, pos, *args)
            done = end <= W
            self.candidates += int(done.sum())
            tail = np.abs(val) > TAIL
            self.rejected += int(((end - pos > 2) & ~tail)[done].sum())
            self.tail += int(tail[done].sum())
            return val, end

        monkeypatch.setattr(generator, "_slow", counting)


def test_python_tables_are_the_scripts_and_the_headers():
    spec = importlib.util.spec_from_file_location("zt", ROOT / "scripts" / "ziggurat_tables.py")
    zt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zt)
    assert (ROOT / "src" / "subaudit" / "engine" / "ziggurat_tables.py").read_text() == zt.render_python()
    tables = importlib.import_module("subaudit.engine.ziggurat_tables")
    ki, wi, fi, r = zt.tables()
    assert list(tables.KI) == ki and tables.R == r
    assert np.array_equal(np.array(tables.WI).view(np.uint64), np.array(wi).view(np.uint64))
    assert np.array_equal(np.array(tables.FI).view(np.uint64), np.array(fi).view(np.uint64))
    header = zt.render()
    assert all(w.hex() in header for w in tables.WI + tables.FI) and r.hex() in header


def test_known_answers_without_the_compiled_library():
    """Values of the compiled kernels, recorded: they hold where the library is not built."""
    b = NumpyStreamBlock([[1]])
    z = b.normal(0, torch.empty(1, 6, dtype=torch.float64))
    assert [v.hex() for v in z[0].tolist()] == [
        "0x1.e371a48891e9dp-2", "0x1.692155d7bfd28p-3", "-0x1.486b8a7a8c41cp+0",
        "-0x1.c5fec01bb3bc8p-1", "-0x1.43460d0c7e5e3p+1", "-0x1.76ec5b0bb9cc9p-1"]
    u = b.uniform(0, torch.empty(1, 5))
    assert [v * 2**24 for v in u[0].tolist()] == [2627958.0, 12955961.0, 1171956.0, 9459088.0, 5847865.0]
    assert [hex(w) for w in b.state[0, 0].tolist()] == [
        "0xb2ed08de61d52548", "0x35613a170e656d4c", "0x637aafc28522aedf", "0xb1e1a5b4430c0fd5",
        "0xd59b3a23b0246fc2", "0x494aa70c8497dd5b", "0x1c21fc9e1011bd5a", "0xa219ff2cacc1c2ff"]
    # 100,002 normals (18 of them from the tail) and 20,006 uniforms: their bytes and the state.
    b = NumpyStreamBlock([[1, 2], [3, 4]])
    z = b.normal(1, torch.empty(2, 50_001, dtype=torch.float64))
    u = b.uniform(0, torch.empty(2, 10_003))
    assert int((z.abs() > TAIL).sum()) == 18
    digest = hashlib.sha256(z.numpy().tobytes() + u.numpy().tobytes() + b.state.tobytes()).hexdigest()
    assert digest == "decfd6ae35c1fbbefde7516edbea8dc8f11f94579b4f543b16f9de64c28dce3c"


@needs_compiled
@pytest.mark.parametrize("runs", [1, 3, 17])
def test_seeding_and_small_draws_are_the_kernels(runs):
    seeds = _seeds(runs, 2, 11 + runs)
    c, p = kernels.CompiledStreamBlock(seeds), NumpyStreamBlock(seeds)
    assert (p.runs, p.purposes, p.words) == (c.runs, c.purposes, c.words)
    assert p.state.dtype == c.state.dtype and np.array_equal(p.state, c.state)
    for n in (0, 1, 3, 4, 5, 37, 1000):
        for kind, purpose in (("uniform", 0), ("f32", 1), ("f64", 1), ("uniform", 1), ("f64", 0)):
            assert _same(_draw(p, kind, purpose, runs, n), _draw(c, kind, purpose, runs, n)), (n, kind)
            assert np.array_equal(p.state, c.state), (n, kind)


@needs_compiled
def test_row_slices_and_a_state_copied_either_way():
    seeds = _seeds(9, 2, 5)
    c, p = kernels.CompiledStreamBlock(seeds), NumpyStreamBlock(seeds)
    for rows, n in ((slice(2, 5), 37), (slice(0, 1), 5), (slice(7, None), 1000), (slice(3, 3), 8)):
        k = len(range(*rows.indices(9)))
        for kind in ("uniform", "f32", "f64"):
            assert _same(_draw(p, kind, 1, k, n, rows), _draw(c, kind, 1, k, n, rows)), (rows, kind)
            assert np.array_equal(p.state, c.state)
    p.state[:] = c.state                       # compiled -> numpy
    assert _same(_draw(p, "f64", 0, 9, 333), _draw(c, "f64", 0, 9, 333))
    q = NumpyStreamBlock(_seeds(9, 2, 6))
    q.normal(1, torch.empty(9, 77))
    c.state[:] = q.state                       # numpy -> compiled
    assert _same(_draw(q, "f32", 1, 9, 501), _draw(c, "f32", 1, 9, 501))
    assert np.array_equal(q.state, c.state)


@needs_compiled
@pytest.mark.parametrize(("runs", "n", "dtype"), [(17, 60_001, "f64"), (256, 2_003, "f32"), (3, 400_000, "f64")])
def test_millions_of_normals_through_the_slow_path_and_the_tail(monkeypatch, runs, n, dtype):
    """About 2.7 million normals in all: thousands of slow draws, rejections and tail draws."""
    seen = _SlowCounter(monkeypatch)
    seeds = _seeds(runs, 1, 1000 * runs)
    c, p = kernels.CompiledStreamBlock(seeds), NumpyStreamBlock(seeds)
    zp, zc = _draw(p, dtype, 0, runs, n), _draw(c, dtype, 0, runs, n)
    assert _same(zp, zc) and np.array_equal(p.state, c.state)
    values = runs * n
    assert seen.candidates > 0.005 * values and seen.rejected > 0.0005 * values
    assert seen.tail > 1e-4 * values and int((zc.abs() > TAIL).sum()) > 1e-4 * values
    assert _same(_draw(p, "f64", 0, runs, 5), _draw(c, "f64", 0, runs, 5))   # and on from there


@needs_compiled
def test_blocks_carries_and_a_short_buffer(monkeypatch):
    """Many small blocks (integers left over from one block to the next) and no margin (the
    buffer grows while a block is analysed): the same bits."""
    monkeypatch.setattr(generator, "BLOCK_VALUES", 16)
    monkeypatch.setattr(generator._Normals, "_margin", lambda self, tb: 0)
    short = []
    block = generator._Normals._block

    def counting(self, tb, need):
        res = block(self, tb, need)
        short.append(not isinstance(res, tuple))
        return res

    monkeypatch.setattr(generator._Normals, "_block", counting)
    seeds = _seeds(5, 1, 77)
    c, p = kernels.CompiledStreamBlock(seeds), NumpyStreamBlock(seeds)
    for n in (3001, 4, 2222):
        assert _same(_draw(p, "f64", 0, 5, n), _draw(c, "f64", 0, 5, n))
        assert np.array_equal(p.state, c.state)
    assert len(short) - sum(short) == 22 and sum(short) > 10   # blocks, and buffers grown


@needs_compiled
@pytest.mark.parametrize(("n_uniforms", "num_params", "steps"), [(0, 37, 2), (5003, 1, 3), (130, 4099, 2)])
def test_draw_only_leaves_the_kernels_state(n_uniforms, num_params, steps):
    seeds = _seeds(6, 2, 3)
    c, p = kernels.CompiledStreamBlock(seeds), NumpyStreamBlock(seeds)
    kernels.draw_only(c, n_uniforms, num_params, steps)
    draw_only(p, n_uniforms, num_params, steps)
    assert np.array_equal(p.state, c.state)


def test_what_the_kernels_refuse():
    p = NumpyStreamBlock([[1, 2], [3, 4]])
    with pytest.raises(ValueError):
        p.uniform(0, torch.empty(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError):
        p.normal(0, torch.empty(2, 4, dtype=torch.float16))
    with pytest.raises(ValueError):
        p.normal(0, torch.empty(4, 2).T)
    with pytest.raises(ValueError):
        draw_only(NumpyStreamBlock([[1]]), 1, 1, 1)
    out = torch.empty(2, 3)
    assert p.normal(1, out) is out and p.uniform(0, out) is out
