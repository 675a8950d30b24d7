"""The price of one recorded op: the operator library first, the meta-tensor replay after."""

from __future__ import annotations

from functools import lru_cache

from roofwise.traces.aten import Call, OpPrice, library_price, unpriced
from roofwise.traces.replay import replay_call


@lru_cache(maxsize=65536)
def price_call(call: Call, allow_tf32: bool = False, replay: bool = True) -> OpPrice:
    """The ledger of a recorded op; `replay=False` never runs the tracer (no torch)."""
    found = library_price(call, allow_tf32)
    if found is not None:
        return found
    if not replay:
        return unpriced("no ledger for this op in the operator library")
    return replay_call(call, allow_tf32)
