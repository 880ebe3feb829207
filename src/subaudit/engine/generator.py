"""The compiled kernels' random streams in numpy: the same numbers, bit for bit, where the
library is not built.

A CPU audit draws its masks' uniforms and its noise from :class:`kernels.CompiledStreamBlock`
(``_kernels.cpp``): per run and purpose a stream of four xoroshiro128++ lanes (Blackman and
Vigna 2018) seeded by splitmix64, value j of a draw from lane j % 4; uniforms of 24 bits;
standard normals by the 256-layer ziggurat of Marsaglia and Tsang (2000) on 52-bit integers
(numpy's construction; the tables in ``ziggurat_tables.py``, written with ``_ziggurat.h`` by
``scripts/ziggurat_tables.py``), with a rare slow path (rejection in a layer, the tail beyond
R for layer 0).  A machine without a C++ compiler at ``pip install`` has no library, yet must
draw the same numbers, so that its runs, scores and audits are those of any other machine:
:class:`NumpyStreamBlock` is that generator in numpy, with the same state array (a state
copies between the two) and the same methods.

How (uint64 arithmetic, wrapping):

* every lane of a call (R runs x 4) advances together: a step of xoroshiro128++ is 14 numpy
  operations on all lanes, in a Python loop over the positions of the draw;
* normals go a block of positions at a time (about a million values): the lanes' integers
  are generated row by row, transposed lane by lane, and the fast path runs over the whole
  block (tables by the integer's low 9 bits, layer and sign, so the sign costs no pass).  The
  slow path runs vectorised over the candidates (integers at or past their layer's
  threshold), each as if it began a normal, in rounds until every one has accepted or runs
  past the block; a fixed-point iteration finds those that do begin a normal (one among the
  integers an earlier slow draw consumed does not); each lane's normals are then gathered
  past the integers its slow draws consumed.  Lanes consume different numbers of integers:
  a block generates a margin more, carries what is left to the next, and in the end each
  lane steps back over what it did not consume (xoroshiro's step is invertible);
* ``exp`` and ``log1p`` of the slow path are Python's ``math`` functions, the C library's that
  the kernels call: numpy's own (SIMD) ``np.exp`` and ``np.log1p`` differ from glibc's in the
  last bit for 5 to 7% of the arguments here (numpy 2.4, AVX-512), and about one tail draw
  in 400 would come out different.

Cost, one core: the Python loop's (about 0.5 us a numpy call) and a dozen passes over each
block.  A tabular training step's draws (R = 256 runs, 36,224 normals and 5,000 uniforms
each) take 0.21 to 0.22 s against the compiled kernels' 0.020 s (10 to 11x); R = 1,000 runs
of 7,690 normals 0.16 s against 0.016 s (about 10x).  Memory: about 60 bytes a value of a
block.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from subaudit.engine.ziggurat_tables import FI, KI, R, WI

__all__ = ["LANES", "NumpyStreamBlock", "draw_only", "seed_states"]

#: xoroshiro128++ lanes per stream; a stream's state is 2 words per lane (a, b).
LANES = 4

_U64 = np.uint64
_KI = np.array(KI, dtype=np.uint64)
_WI = np.array(WI, dtype=np.float64)
_FI = np.array(FI, dtype=np.float64)
# The tables by the integer's low 9 bits (layer and sign): x = rabs * (+-wi) is the kernels'
# rabs * wi with its sign bit set (IEEE multiplication is symmetric in the sign, -0.0 included).
_KI9 = np.concatenate([_KI, _KI])
_WI9 = np.concatenate([_WI, -_WI])
_M52 = _U64(0x000FFFFFFFFFFFFF)
# Shift counts as 0-d arrays: numpy takes them faster than scalars (a few tenths of a us a call).
_S = {k: np.array(k, dtype=np.uint64) for k in (9, 11, 15, 17, 21, 27, 28, 30, 31, 36, 40, 47, 49)}
_TWO_53 = 2.0 ** -53
_TWO_24 = np.float32(2.0 ** -24)

#: Values of a normal draw analysed at once (positions x lanes): bounds the memory of a call
#: (about 60 bytes a value) while keeping numpy's passes long.
BLOCK_VALUES = 1 << 20
#: Extra integers a normal consumes, mean and variance per normal (measured: the slow
#: path's test uniform, its rejections and the tail's pairs), for the block's margin.
_EXTRA_MEAN, _EXTRA_VAR = 0.022, 0.04


def _fill(a: np.ndarray, b: np.ndarray, buf: np.ndarray) -> None:
    """One step of xoroshiro128++ on every lane (state ``a``, ``b``, any shape, in place) per
    row of ``buf``, its outputs into that row: 14 numpy operations a step, with local names
    (this loop is most of the generator's time)."""
    t = np.empty_like(a)
    lsh, rsh, bor, bxor, add = np.left_shift, np.right_shift, np.bitwise_or, np.bitwise_xor, np.add
    s15, s17, s21, s28, s36, s47, s49 = (_S[k] for k in (15, 17, 21, 28, 36, 47, 49))
    for res in buf:
        add(a, b, out=t)
        lsh(t, s17, out=res)
        rsh(t, s47, out=t)
        bor(res, t, out=res)
        add(res, a, out=res)                 # rotl(a + b, 17) + a
        bxor(b, a, out=b)                    # s1 = b ^ a
        lsh(a, s49, out=t)
        rsh(a, s15, out=a)
        bor(a, t, out=a)
        bxor(a, b, out=a)
        lsh(b, s21, out=t)
        bxor(a, t, out=a)                    # a = rotl(a, 49) ^ s1 ^ (s1 << 21)
        lsh(b, s28, out=t)
        rsh(b, s36, out=b)
        bor(b, t, out=b)                     # b = rotl(s1, 28)


def _back(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> None:
    """Undo one step of xoroshiro128++ on the lanes of ``mask``."""
    s = _S
    s1 = (b << s[36]) | (b >> s[28])         # rotl(b, 36) = the step's s1
    v = a ^ s1 ^ (s1 << s[21])               # = rotl(a_old, 49)
    a_old = (v << s[15]) | (v >> s[49])
    np.copyto(b, s1 ^ a_old, where=mask)
    np.copyto(a, a_old, where=mask)


def _exp(x: np.ndarray) -> np.ndarray:
    return np.fromiter(map(math.exp, x.tolist()), np.float64, x.size)


def _log1p(x: np.ndarray) -> np.ndarray:
    return np.fromiter(map(math.log1p, x.tolist()), np.float64, x.size)


def _double(r: np.ndarray) -> np.ndarray:
    """The kernels' ``next_double``: the top 53 bits on [0, 1)."""
    return (r >> _S[11]).astype(np.float64) * _TWO_53


def _layer(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 64-bit integer's layer and sign (its low 9 bits), 52-bit magnitude and signed x."""
    idx = (r & _U64(0x1FF)).view(np.int64)
    rabs = (r >> _S[9]) & _M52
    return idx, rabs, rabs.view(np.int64).astype(np.float64) * _WI9[idx]


def _slow(raw: np.ndarray, W: int, pos: np.ndarray, lane: np.ndarray, idx: np.ndarray,
          x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The kernels' ``normal_slow`` for each candidate integer (position ``pos`` of lane
    ``lane`` in ``raw``, lanes x W positions, flat; its low 9 bits ``idx`` and signed ``x``
    from the fast path) as if it began a normal: its value and the position after the last
    integer it consumed (``W + 1`` where it would run past the block)."""
    val = np.zeros(pos.size)
    end = np.full(pos.size, W + 1, dtype=np.int64)
    base = lane * W
    q = pos + 1                               # the next integer of the candidate's lane
    layer = idx & 0xFF
    tail = np.flatnonzero(layer == 0)         # candidates in the tail's loop
    neg = idx >= 0x100                        # (their sign)
    j = np.flatnonzero(layer != 0)            # candidates at the wedge's test: layer and x
    layer, x = layer[j], x[j]
    while j.size or tail.size:
        if j.size:
            inside = q[j] < W                 # the test's uniform is in the block
            j, layer, x = j[inside], layer[inside], x[inside]
            u = _double(raw[base[j] + q[j]])
            q[j] += 1
            ok = (_FI[layer - 1] - _FI[layer]) * u + _FI[layer] < _exp((-0.5 * x) * x)
            end[j[ok]], val[j[ok]] = q[j[ok]], x[ok]
            j = j[~ok]
            j = j[q[j] < W]                   # rejected: the next integer, if in the block
            idx, rabs, x = _layer(raw[base[j] + q[j]])
            q[j] += 1
            layer = idx & 0xFF
            ok = rabs < _KI[layer]
            end[j[ok]], val[j[ok]] = q[j[ok]], x[ok]
            to_tail = ~ok & (layer == 0)
            neg[j[to_tail]] = idx[to_tail] >= 0x100
            tail = np.concatenate([tail, j[to_tail]])
            rest = ~ok & (layer != 0)
            j, layer, x = j[rest], layer[rest], x[rest]
        if tail.size:
            tail = tail[q[tail] + 1 < W]
            xx = -_log1p(-_double(raw[base[tail] + q[tail]])) / R
            yy = -_log1p(-_double(raw[base[tail] + q[tail] + 1]))
            q[tail] += 2
            ok = yy + yy > xx * xx
            v = R + xx[ok]
            val[tail[ok]] = np.where(neg[tail[ok]], -v, v)
            end[tail[ok]] = q[tail[ok]]
            tail = tail[~ok]
    return val, end


class _Normals:
    """A normal draw of n values from the lanes ``a``, ``b`` (lane l = run l // 4, lane l % 4
    of its stream; updated in place), block by block of positions.  The integers are generated
    position by position (a row of all lanes at a time) and analysed lane by lane (the block
    transposed); arrays of a block's size are kept from block to block (new ones cost their
    page faults)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, n: int) -> None:
        self.a, self.b = a, b
        L = self.L = a.size
        self.G = -(-n // LANES)               # positions: lanes k < rem draw G normals, the others G - 1
        self.rem = n - (self.G - 1) * LANES
        self.short = (np.arange(L) % LANES) >= self.rem
        self.rows = max(64, BLOCK_VALUES // L)
        # Generated integers, rows [0, W) of positions x lanes (rows padded: a power-of-two
        # stride makes the transposition several times slower); lane l's unconsumed ones
        # from row off[l] on.
        self.store = np.empty((0, L + 8), dtype=np.uint64)
        self.W = 0
        self.off = np.zeros(L, dtype=np.int64)
        self.tmp: dict[str, np.ndarray] = {}

    def _scratch(self, name: str, size: int, dtype: type) -> np.ndarray:
        arr = self.tmp.get(name)
        if arr is None or arr.size < size:   # with room for the next blocks' few more rows
            arr = self.tmp[name] = np.empty(size + size // 4, dtype=dtype)
        return arr[:size]

    def _margin(self, tb: int) -> int:
        return int(math.ceil(_EXTRA_MEAN * tb + 6 * math.sqrt(_EXTRA_VAR * tb))) + 8

    def _grow(self, rows: int) -> None:
        """Generate ``rows`` more integers of every lane below the buffer."""
        if self.W + rows > self.store.shape[0]:
            old = self.store[:self.W]
            self.store = np.empty((self.W + rows + (self.W + rows) // 4, self.L + 8), dtype=np.uint64)
            self.store[:self.W] = old
        _fill(self.a, self.b, self.store[self.W:self.W + rows, :self.L])
        self.W += rows

    def _drop(self, rows: int) -> None:
        """Forget the first ``rows`` rows of the buffer (consumed by every lane)."""
        if rows == 0:
            return
        self.store[:self.W - rows] = self.store[rows:self.W]
        self.W -= rows
        self.off -= rows

    def _block(self, tb: int, need: np.ndarray) -> tuple[np.ndarray, np.ndarray] | int:
        """The next ``tb`` normals of every lane as (L, tb) and the position after the
        integers consumed by each lane's first ``need`` of them; or the rows missing."""
        off, L, W = self.off, self.L, self.W
        size = L * W
        lanes = self._scratch("raw", size, np.uint64).reshape(L, W)
        np.copyto(lanes, self.store[:W, :L].T)
        raw = lanes.reshape(-1)
        # The fast path over the whole block, in place in arrays kept from block to block.
        idx = self._scratch("idx", size, np.int64)     # layer and sign
        np.bitwise_and(raw, _U64(0x1FF), out=idx.view(np.uint64))
        rabs = self._scratch("rabs", size, np.uint64)
        np.right_shift(raw, _S[9], out=rabs)
        rabs &= _M52
        tab = self._scratch("tab", size, np.uint64)
        _KI9.take(idx, out=tab, mode="wrap")
        slow = self._scratch("slow", size, np.bool_)
        np.greater_equal(rabs, tab, out=slow)
        lane, pos = np.divmod(np.flatnonzero(slow), W)  # by lane, then position
        x = self._scratch("x", size, np.float64)
        np.copyto(x, rabs.view(np.int64), casting="safe")
        w = tab.view(np.float64)
        _WI9.take(idx, out=w, mode="wrap")
        x *= w
        # The slow path of every candidate not consumed in an earlier block.
        cand = lane * W + pos
        keep = pos >= off[lane]
        pos, lane, cand = pos[keep], lane[keep], cand[keep]
        val, end = _slow(raw, W, pos, lane, idx[cand], x[cand])
        # Which candidates begin a normal: not inside the integers an earlier one consumed.
        nxt = np.searchsorted(cand, lane * W + np.minimum(end, W))
        skips = nxt > np.arange(pos.size) + 1
        start = np.ones(pos.size, dtype=bool)
        while True:
            sk = np.flatnonzero(start & skips)
            d = np.zeros(pos.size + 1, dtype=np.int64)
            np.add.at(d, sk + 1, 1)
            np.add.at(d, nxt[sk], -1)
            new = np.cumsum(d[:-1]) == 0
            if np.array_equal(new, start):
                break
            start = new
        pos, lane, val, end = pos[start], lane[start], val[start], end[start]
        extra = end - pos - 1                  # integers a slow normal consumed beyond its first
        before = np.cumsum(extra) - extra
        before -= before[np.searchsorted(lane, lane)]   # of earlier slow normals of the lane
        t = pos - off[lane] - before           # the normal's index in this block
        live = t < tb
        lacking = np.bincount(lane[live], weights=extra[live], minlength=L) + off + tb - W
        if np.any(end[live] > W) or lacking.max() > 0:
            return max(16, int(lacking.max()) + self._margin(tb) // 2)
        x[lane[live] * W + pos[live]] = val[live]
        # The gather: normal t of lane l is at position off[l] + t + (extra integers before it).
        at = rabs[:L * tb].view(np.int64).reshape(L, tb)  # (rabs and tab are free again)
        at.fill(1)
        at[:, 0] = np.arange(L) * W + off
        inner = t < tb - 1
        at[lane[inner], t[inner] + 1] += extra[inner]
        np.cumsum(at, axis=1, out=at)
        z = w[:L * tb].reshape(L, tb)
        x.take(at, out=z, mode="wrap")
        used = t < need[lane]
        consumed = off + need + np.bincount(lane[used], weights=extra[used], minlength=L).astype(np.int64)
        return z, consumed

    def run(self, out: np.ndarray) -> None:
        """Draw into ``out`` (runs, n), then leave each lane's state after what it consumed."""
        Rs, n = out.shape
        L = self.L
        for t0 in range(0, self.G, self.rows):
            tb = min(self.rows, self.G - t0)
            need = np.full(L, tb, dtype=np.int64)
            if t0 + tb == self.G:
                need[self.short] -= 1
            self._grow(max(0, tb + self._margin(tb) - (self.W - int(self.off.max()))))
            while not isinstance(res := self._block(tb, need), tuple):
                self._grow(res)
            z, self.off = res
            full = tb if t0 + tb < self.G or self.rem == LANES else tb - 1
            if full:   # value t of lane k of run r is out[r, 4 t + k]
                dst = out[:, LANES * t0:LANES * (t0 + full)].reshape(Rs, full, LANES)
                dst[...] = z[:, :full].reshape(Rs, LANES, full).transpose(0, 2, 1)
            if full < tb:
                out[:, LANES * (t0 + full):] = z[:, full].reshape(Rs, LANES)[:, :self.rem]
            self._drop(int(self.off.min()))
        back = self.W - self.off
        for i in range(int(back.max()) if back.size else 0):
            _back(self.a, self.b, back > i)


def _uniforms(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """A uniform draw into ``out`` (runs, n) from the lanes ``a``, ``b`` (runs, 4), in place."""
    Rs, n = out.shape
    G, rem = divmod(n, LANES)
    rows = max(64, BLOCK_VALUES // (Rs * LANES))
    buf = np.empty((min(rows, G), Rs, LANES), dtype=np.uint64)
    for t0 in range(0, G, rows):
        tb = min(rows, G - t0)
        _fill(a, b, buf[:tb])
        u = (buf[:tb] >> _S[40]).astype(np.float32)
        u *= _TWO_24
        out[:, LANES * t0:LANES * (t0 + tb)].reshape(Rs, tb, LANES)[...] = u.transpose(1, 0, 2)
    if rem:
        res = np.empty((1, Rs, rem), dtype=np.uint64)
        _fill(a[:, :rem], b[:, :rem], res)   # views: the first rem lanes step once more
        u = (res[0] >> _S[40]).astype(np.float32)
        u *= _TWO_24
        out[:, LANES * G:] = u


def seed_states(seeds: np.ndarray) -> np.ndarray:
    """The kernels' ``sa_seed`` for every seed: splitmix64 outputs, two words per lane."""
    s = seeds.astype(np.uint64)
    words = []
    for _ in range(2 * LANES):
        s += _U64(0x9E3779B97F4A7C15)
        z = s.copy()
        z = (z ^ (z >> _S[30])) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _S[27])) * _U64(0x94D049BB133111EB)
        words.append(z ^ (z >> _S[31]))
    return np.stack(words, axis=-1)


class NumpyStreamBlock:
    """:class:`subaudit.engine.kernels.CompiledStreamBlock` in numpy: random streams of R runs,
    ``purposes`` each, as one array of states (``state[r, k]``: stream (r, k), 8 words, the
    kernels' layout), seeded with ``seeds[r][k]``; the same draws, bit for bit."""

    def __init__(self, seeds: Sequence[Sequence[int]]) -> None:
        seeds = np.asarray(seeds, dtype=np.uint64)
        self.runs, self.purposes = seeds.shape
        self.words = 2 * LANES
        self.state = seed_states(seeds)

    def _lanes(self, purpose: int, out: torch.Tensor, rows: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The lanes (a, b) of the rows' streams of ``purpose`` as (runs, 4) copies and the
        draw's destination as (runs, n), or None when nothing is drawn."""
        if not out.is_contiguous() or out.device.type != "cpu":
            raise ValueError("draws go into a contiguous CPU tensor")
        lo, hi, _ = rows.indices(self.runs)
        n = out.numel() // max(1, hi - lo)
        if hi <= lo or n == 0:
            return None
        words = self.state[lo:hi, purpose]
        dest = out.detach().view(-1).numpy()[:(hi - lo) * n].reshape(hi - lo, n)
        return words[:, 0::2].copy(), words[:, 1::2].copy(), dest

    def _store(self, purpose: int, rows: slice, a: np.ndarray, b: np.ndarray) -> None:
        lo, hi, _ = rows.indices(self.runs)
        words = self.state[lo:hi, purpose]
        words[:, 0::2], words[:, 1::2] = a.reshape(hi - lo, LANES), b.reshape(hi - lo, LANES)

    def uniform(self, purpose: int, out: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """Each run's next ``n`` uniforms on [0, 1) into row r of ``out`` (float32)."""
        if out.dtype != torch.float32:
            raise ValueError("uniforms are float32")
        lanes = self._lanes(purpose, out, rows)
        if lanes is not None:
            a, b, dest = lanes
            _uniforms(a, b, dest)
            self._store(purpose, rows, a, b)
        return out

    def normal(self, purpose: int, out: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """Each run's next ``n`` standard normals into row r of ``out`` (float32: the float64
        draws rounded)."""
        if out.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"kernels compute in float32 or float64, not {out.dtype}")
        lanes = self._lanes(purpose, out, rows)
        if lanes is not None:
            a, b, dest = lanes
            a, b = a.reshape(-1), b.reshape(-1)
            _Normals(a, b, dest.shape[1]).run(dest)
            self._store(purpose, rows, a, b)
        return out


def draw_only(block: NumpyStreamBlock, n_uniforms: int, num_params: int, steps: int) -> None:
    """:func:`subaudit.engine.kernels.draw_only` for a numpy block: the draws of ``steps``
    training steps (per run ``n_uniforms`` uniforms from purpose 0, then ``num_params``
    normals from purpose 1), values discarded."""
    if block.purposes != 2:
        raise ValueError("draw_only needs a block of (R, 2) streams: mask, noise")
    u = torch.empty(block.runs, n_uniforms, dtype=torch.float32)
    z = torch.empty(block.runs, num_params, dtype=torch.float32)
    for _ in range(steps):
        block.uniform(0, u)
        block.normal(1, z)
