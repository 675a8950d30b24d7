"""Pricing: SOL, bounds, per-pipe compute, cycles, and the vectorised path against a loop."""

from __future__ import annotations

import numpy as np
import pytest

from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.lint.misuse import softmax_row_ledger
from roofwise.ops import qk_norm_rope_quant
from roofwise.pricing.core import cycles_by_unit, price_columns, price_ledger
from roofwise.pricing.reasons import Reason

BW = 4800e9 * 0.9380


def test_case_study_sol_matches_seed(h200):
    price = price_ledger(qk_norm_rope_quant(), h200)
    assert round(price.sol_time_s * 1e6, 3) == 15.051
    assert price.bound == "memory" and price.mix == "read"
    cuda = 1154 * 163840 / (67.0e12 * 0.8548)
    sfu = 163840 / (16 * 132 * 1.98e9)
    assert price.unit_time_s["cuda_core.fp32"] == pytest.approx(cuda)
    assert price.compute_time_s == pytest.approx(max(cuda, sfu))
    assert price.compute_serial_time_s == pytest.approx(cuda + sfu)
    assert Reason.UNCALIBRATED_UNIT in price.flags  # the sfu rate is the guide's


def test_sustained_regime_prices_slower(h200):
    gemm = Ledger("gemm", "tensor_core.bf16", (Tensor("a", (4096, 4096), "bf16", Role.INPUT),),
                  (Work("tensor_core.bf16", "contraction", 2 * 4096**3),))
    burst = price_ledger(gemm, h200)
    sustained = price_ledger(gemm, h200, regime="sustained")
    assert burst.compute_time_s == pytest.approx(2 * 4096**3 / (989.5e12 * 0.7680))
    assert sustained.compute_time_s == pytest.approx(2 * 4096**3 / (989.5e12 * 0.7077))


def test_tie_is_memory(h200):
    rate = 67.0e12 * 0.8548
    priced = price_columns(h200, np.array([rate]), np.array([BW]),
                           np.array(["cuda_core.fp32"], dtype=object))
    assert priced.memory_time_s[0] == pytest.approx(priced.compute_time_s[0])
    assert bool(priced.bound_memory[0])


def test_per_pipe_softmax_on_h200_is_sfu_bound(h200):
    price = price_ledger(softmax_row_ledger("cuda_core.fp32", "sfu.fp32"), h200)
    assert price.binding_unit == "sfu.fp32"
    assert price.unit_time_s["sfu.fp32"] == pytest.approx(8192 / (16 * 132 * 1.98e9))


def test_ascend_cycles_per_pipe(machines):
    row = softmax_row_ledger("ascend_vector.alu", "ascend_vector.sfu")
    cycles = cycles_by_unit(row.ops_by_unit, machines["ascend-a5-vector"])
    assert cycles == {"ascend_vector.sfu": 1024.0, "ascend_vector.alu": 642.5098039215686}
    assert round(sum(cycles.values()) / (40960 / 51), 3) == 2.075


def test_ascend_seconds_are_blank_for_the_gap(machines):
    row = softmax_row_ledger("ascend_vector.alu", "ascend_vector.sfu")
    price = price_ledger(row, machines["ascend-a5-vector"])
    assert Reason.UNIT_RATE_GAP in price.flags and Reason.NO_BANDWIDTH in price.flags


def test_unknown_roof_is_flagged(h200):
    priced = price_columns(h200, np.array([1.0]), np.array([1.0]),
                           np.array(["tensor_core.fp4"], dtype=object))
    assert Reason.UNKNOWN_ROOF & int(priced.flags[0])


def test_auto_mix_follows_read_write_split(h200):
    n = 3
    read = np.array([100.0, 100.0, 200.0])
    write = np.array([0.0, 100.0, 100.0])
    priced = price_columns(h200, np.zeros(n), read + write,
                           np.full(n, "cuda_core.fp32", dtype=object), mix="auto",
                           read_bytes=read, write_bytes=write)
    assert list(priced.mix) == ["read", "copy", "triad"]
    assert priced.bandwidth_bytes_per_s[1] == pytest.approx(4800e9 * 0.8183)


def test_vectorised_equals_row_by_row(h200):
    rng = np.random.default_rng(0)
    n = 200
    flops = rng.uniform(1e6, 1e12, n)
    bytes_ = rng.uniform(1e3, 1e9, n)
    roofs = rng.choice(["cuda_core.fp32", "tensor_core.bf16", "tensor_core.fp8"], n).astype(object)
    priced = price_columns(h200, flops, bytes_, roofs)
    for i in range(n):
        rate = h200.units[roofs[i]].effective_ops_per_s()
        expected = max(bytes_[i] / BW, flops[i] / rate)
        assert priced.sol_time_s[i] == pytest.approx(expected)


def test_auto_mix_reads_a_reduction_that_writes_4_bytes_as_read(h200):
    """Issue 8: a read:write *ratio* made `read` (ratio infinity) unreachable for any row that
    writes a byte, so a 2 GiB sum writing 4 B was priced on the triad mix (0.8427) and read
    above 100% of SOL. By read share (1 - 4 / 2^31 = 0.999999998) it is `read`."""
    gib2 = float(2 << 30)
    read = np.array([gib2, 1e9, 4.0, 1e6])
    write = np.array([4.0, 0.3e6, gib2, 1e9])  # decode step: 1 GB in, 0.3 MB out
    priced = price_columns(h200, np.zeros(4), read + write,
                           np.full(4, "cuda_core.fp32", dtype=object), mix="auto",
                           read_bytes=read, write_bytes=write)
    assert list(priced.mix) == ["read", "read", "write", "write"]
    assert priced.bandwidth_bytes_per_s[0] == pytest.approx(4800e9 * 0.9380)
    assert priced.bandwidth_bytes_per_s[2] == pytest.approx(4800e9 * 0.8926)
    # timed at 0.48 ms (4.474 TB/s), the reduction is 99.37% of the read mix's SOL; on the
    # triad mix (4.045 TB/s) the same time would read 110.6%, an anomaly
    sol_s = (gib2 + 4) / (4800e9 * 0.9380)
    assert sol_s / 0.48e-3 == pytest.approx(0.9937, abs=1e-4)
    assert (gib2 + 4) / (4800e9 * 0.8427) / 0.48e-3 == pytest.approx(1.106, abs=1e-3)
    assert priced.sol_time_s[0] == pytest.approx(sol_s)


def test_auto_mix_keeps_rows_without_a_split_on_the_envelope(h200):
    read = np.array([np.nan, 0.0])
    write = np.array([np.nan, 0.0])
    priced = price_columns(h200, np.zeros(2), np.array([1e6, 0.0]),
                           np.full(2, "cuda_core.fp32", dtype=object), mix="auto",
                           read_bytes=read, write_bytes=write)
    assert list(priced.mix) == ["read", "read"]  # the envelope mix on this profile
