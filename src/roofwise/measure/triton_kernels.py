# mypy: ignore-errors
"""Triton kernels for calibration: importing this module needs triton (a GPU machine).

Kept at module level because Triton resolves names through the kernel's module globals.
"""

from __future__ import annotations

import triton
import triton.language as tl

CHAINS = 8  # independent FMA chains per element in fma_k
SFU_CHAINS = 4  # independent exp2+rsqrt chains per element in sfu_k


@triton.jit
def copy_k(src, dst, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for start in range(pid * BLOCK, n, step):  # grid-stride
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def triad_k(b, c, a, s, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(b + offs, mask=mask) + s * tl.load(c + offs, mask=mask)
        tl.store(a + offs, x, mask=mask)


@triton.jit
def read_k(src, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(src + offs, mask=offs < n, other=0.0)
    tl.store(out + pid, tl.sum(acc, axis=0))


@triton.jit
def write_k(dst, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        tl.store(dst + offs, offs.to(tl.float32), mask=offs < n)  # non-constant data


@triton.jit
def l2_reread_k(src, out, n, repeats, BLOCK: tl.constexpr):
    """Read the n floats at `src` `repeats` times, each pass shifted by a different offset
    (so no load is loop-invariant); with src a quarter of L2, passes after the first are
    served by L2."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for r in range(repeats):
        shift = (r * 7919 * BLOCK) % n
        for start in range(pid * BLOCK, n, step):
            offs = (start + shift + tl.arange(0, BLOCK)) % n
            acc += tl.load(src + offs)
    tl.store(out + pid, tl.sum(acc, axis=0))


@triton.jit
def fma_k(out, iters, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = offs.to(tl.float32) * 1e-9
    a0 = x + 0.1
    a1 = x + 0.2
    a2 = x + 0.3
    a3 = x + 0.4
    a4 = x + 0.5
    a5 = x + 0.6
    a6 = x + 0.7
    a7 = x + 0.8
    for _ in range(iters):  # CHAINS independent FMA chains per element
        a0 = a0 * 0.999 + 0.001
        a1 = a1 * 0.999 + 0.001
        a2 = a2 * 0.999 + 0.001
        a3 = a3 * 0.999 + 0.001
        a4 = a4 * 0.999 + 0.001
        a5 = a5 * 0.999 + 0.001
        a6 = a6 * 0.999 + 0.001
        a7 = a7 * 0.999 + 0.001
    tl.store(out + offs, a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7)


@triton.jit
def sfu_k(out, iters, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = offs.to(tl.float32) * 1e-9
    a0 = x + 1.1
    a1 = x + 1.2
    a2 = x + 1.3
    a3 = x + 1.4
    for _ in range(iters):  # SFU_CHAINS chains; each step one exp2 and one rsqrt
        a0 = tl.math.rsqrt(tl.exp2(a0 * -0.5) + 1.0)
        a1 = tl.math.rsqrt(tl.exp2(a1 * -0.5) + 1.0)
        a2 = tl.math.rsqrt(tl.exp2(a2 * -0.5) + 1.0)
        a3 = tl.math.rsqrt(tl.exp2(a3 * -0.5) + 1.0)
    tl.store(out + offs, a0 + a1 + a2 + a3)


STREAM = {"copy": copy_k, "triad": triad_k, "read": read_k, "write": write_k}
ALU = {"fma": fma_k, "sfu": sfu_k}
