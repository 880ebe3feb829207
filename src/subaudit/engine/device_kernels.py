"""The compiled kernels' generator (``_kernels.cpp``) as two Triton kernels: the bodies only,
compiled for a GPU by :func:`triton.jit` or run on the CPU by Triton's interpreter (the tests).

Each program owns ``BLOCK`` lanes (lane ``4 r + k`` is lane k of run r's stream), and each
lane draws its own values one integer at a time, exactly as ``_kernels.cpp``: value ``4 t + k``
of a draw is lane k's t-th.  Every operation is an integer one, an exact int-to-double
conversion, or a float64 operation in the C++ order, so a value is the kernels' bit for bit,
with one exception: the slow path's ``exp`` (a rejection test) and ``log`` (the tail beyond R)
are the device's, which may differ from the C library's in the last bit (see
:mod:`subaudit.engine.device_streams`).  The tail's ``log1p(-u)`` is ``log(1 - u)``: ``1 - u``
is exact for a 53-bit u, so both are the logarithm of the same number.

No ``triton.jit`` functions are called (helpers, ``tl.zeros``, ``tl.max``): the interpreter runs
these bodies in this module's namespace, where they could not be; so the xoroshiro128++ step is
written out, and the loop's test reduces with ``tl.reduce`` and the combiner the interpreter
knows.
"""

from __future__ import annotations

import triton.language as tl


def uniform_body(state, stride, out, rows, n, BLOCK: tl.constexpr):
    """Each of ``rows`` runs' next ``n`` uniforms (24 bits, float32) into ``out`` (rows, n);
    the run's stream at ``state + run * stride`` (4 lanes of two words), updated in place."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    run = (lane // 4).to(tl.int64)
    k = lane % 4
    live = run < rows
    cnt = n // 4 + (k < n % 4).to(tl.int32)
    where = state + run * stride + 2 * k
    a = tl.load(where, mask=live, other=0).to(tl.uint64, bitcast=True)
    b = tl.load(where + 1, mask=live, other=0).to(tl.uint64, bitcast=True)
    dst = out + run * n + k
    for t in range(0, (n + 3) // 4):
        act = live & (t < cnt)
        s1 = b ^ a
        ab = a + b
        res = ((ab << 17) | (ab >> 47)) + a
        a = tl.where(act, ((a << 49) | (a >> 15)) ^ s1 ^ (s1 << 21), a)
        b = tl.where(act, (s1 << 28) | (s1 >> 36), b)
        tl.store(dst + 4 * t, (res >> 40).to(tl.float32) * 5.9604644775390625e-08, mask=act)
    tl.store(where, a.to(tl.int64, bitcast=True), mask=live)
    tl.store(where + 1, b.to(tl.int64, bitcast=True), mask=live)


def normal_body(state, stride, out, rows, n, ki, wi, fi, consts, BLOCK: tl.constexpr):
    """Each of ``rows`` runs' next ``n`` standard normals into ``out`` (rows, n; float32 values
    are the float64 draws rounded): the ziggurat of ``_kernels.cpp`` (tables ``ki``, ``wi``,
    ``fi``; ``consts[0]`` its R), one integer per lane and iteration, in four phases: 0 a new
    integer, 1 the wedge's test uniform, 2 and 3 the tail's two uniforms."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    run = (lane // 4).to(tl.int64)
    k = lane % 4
    live = run < rows
    cnt = n // 4 + (k < n % 4).to(tl.int32)
    where = state + run * stride + 2 * k
    a = tl.load(where, mask=live, other=0).to(tl.uint64, bitcast=True)
    b = tl.load(where + 1, mask=live, other=0).to(tl.uint64, bitcast=True)
    dst = out + run * n + k
    zig_r = tl.load(consts)
    t = tl.full([BLOCK], 0, tl.int32)          # values done
    phase = tl.full([BLOCK], 0, tl.int32)
    layer = tl.full([BLOCK], 0, tl.int32)      # of the pending integer
    neg = tl.full([BLOCK], 0, tl.int1)
    x = tl.full([BLOCK], 0.0, tl.float64)        # its signed value, or the tail's xx
    act = live & (t < cnt)
    while tl.reduce(act.to(tl.int32), 0, tl.standard._elementwise_max) > 0:
        s1 = b ^ a
        ab = a + b
        res = ((ab << 17) | (ab >> 47)) + a
        a = tl.where(act, ((a << 49) | (a >> 15)) ^ s1 ^ (s1 << 21), a)
        b = tl.where(act, (s1 << 28) | (s1 >> 36), b)
        u = (res >> 11).to(tl.float64) * 1.1102230246251565e-16
        # phase 0: a ziggurat integer, its layer, sign and 52-bit magnitude
        new_layer = (res & 255).to(tl.int32)
        new_neg = ((res >> 8) & 1) != 0
        rabs = (res << 3) >> 12
        new_x = rabs.to(tl.float64) * tl.load(wi + new_layer)
        new_x = tl.where(new_neg, -new_x, new_x)
        fast = rabs.to(tl.int64, bitcast=True) < tl.load(ki + new_layer)
        # phase 1: the wedge's test of the pending x
        f_lo = tl.load(fi + layer)
        f_hi = tl.load(fi + tl.maximum(layer - 1, 0))
        wedge_ok = (f_hi - f_lo) * u + f_lo < tl.exp((-0.5 * x) * x)
        # phases 2 and 3: the tail's xx, then yy and its test
        lg = -tl.log(1.0 - u)
        xx = lg / zig_r
        tail_ok = lg + lg > x * x
        tail_val = zig_r + x
        tail_val = tl.where(neg, -tail_val, tail_val)
        p0 = act & (phase == 0)
        p1 = act & (phase == 1)
        p3 = act & (phase == 3)
        emit = (p0 & fast) | (p1 & wedge_ok) | (p3 & tail_ok)
        val = tl.where(p0, new_x, tl.where(p1, x, tail_val))
        tl.store(dst + 4 * t.to(tl.int64), val.to(out.dtype.element_ty), mask=emit)
        t = t + emit.to(tl.int32)
        # the next phase: a rejected wedge test takes a new integer (phase 0, the same value)
        slow = p0 & ~fast
        phase = tl.where(slow, tl.where(new_layer == 0, 2, 1),
                         tl.where(p1 & ~wedge_ok, 0,
                                  tl.where(act & (phase == 2), 3,
                                           tl.where(p3 & ~tail_ok, 2, tl.where(emit, 0, phase)))))
        layer = tl.where(slow, new_layer, layer)
        neg = tl.where(slow, new_neg, neg)
        x = tl.where(slow, new_x, tl.where(act & (phase == 3) & ~p3, xx, x))
        act = live & (t < cnt)
    tl.store(where, a.to(tl.int64, bitcast=True), mask=live)
    tl.store(where + 1, b.to(tl.int64, bitcast=True), mask=live)
