"""The price of one recorded op: the operator library first, the meta-tensor replay after.

No op may end the command: whatever the recorded arguments, an op gets a price or a reason.
A failure inside roofwise's own counting is a bug, said as such in the reason (and the fuzz
test in tests/traces/test_schemas_fuzz.py asserts it never happens)."""

from __future__ import annotations

from functools import lru_cache

from roofwise.traces.aten import Call, OpPrice, library_price, unpriced
from roofwise.traces.replay import replay_call

INTERNAL_ERROR = "roofwise failed to price it, a bug to report"


@lru_cache(maxsize=65536)
def price_call(call: Call, allow_tf32: bool = False, replay: bool = True,
               winograd: bool = False) -> OpPrice:
    """The ledger of a recorded op; `replay=False` never runs the tracer (no torch);
    `winograd`: a kernel it launched is a Winograd convolution."""
    try:
        found = library_price(call, allow_tf32, replay, winograd)
        if found is not None:
            return found
        if not replay:
            return unpriced("no ledger for this op in the operator library")
        return replay_call(call, allow_tf32)
    except Exception as exc:  # the promise above: a reason, never a traceback
        return unpriced(f"{INTERNAL_ERROR} ({type(exc).__name__}: "
                        f"{(str(exc).splitlines() or [''])[0]})")
