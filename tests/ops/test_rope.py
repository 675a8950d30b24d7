"""RoPE: bytes from the bound arrays, FLOPs by hand."""

import numpy as np

from roofwise.ops import rope


def test_rope_bytes_recount() -> None:
    t, h, d = 12, 4, 64
    arrays: list[np.ndarray] = [np.empty((t, h, d), np.float16), np.empty((t, d), np.float32),
              np.empty((t, d), np.float32)]
    ledger = rope(t, h, d)
    assert ledger.read_bytes == sum(a.nbytes for a in arrays)
    assert ledger.write_bytes == np.empty((t, h, d), np.float16).nbytes
    assert ledger.lookup_bytes == 2 * t * d * 4


def test_rope_flops_hand_count_partial_rotary() -> None:
    # 12 tokens x 4 heads x 32 rotated channels x 3 = 4,608; tables are (12, 32)
    ledger = rope(12, 4, 64, rotary_dim=32)
    assert ledger.flops == 4_608
    assert ledger.tensor("cos").shape == (12, 32)
