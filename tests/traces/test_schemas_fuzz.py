"""No op in any trace may end the command: argument lists fuzzed for every op the operator
library prices (each of its schemas, filled with values that fit and values that do not),
and every one gets a price or a reason, never an exception, never roofwise's own failure."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofwise.traces.aten import make_call, priced_by_name
from roofwise.traces.attention import FORMS
from roofwise.traces.prices import INTERNAL_ERROR, price_call
from roofwise.traces.schemas import TRACE_DTYPES, schemas_for

OPS = sorted({*(f"aten::{n}" for n in priced_by_name()), *FORMS, "flash_attn::_flash_attn_forward"})
OPS = [name for name in OPS if schemas_for(name, use_torch=False)]

DTYPES = [*TRACE_DTYPES, "c10::complex<float>", "unsigned int"]
KINDS = ["", "Scalar", "ScalarList", "TensorList", "GenericList"]
dims = st.one_of(
    st.lists(st.integers(0, 70), max_size=5),  # plausible shapes
    st.lists(st.integers(0, 1 << 50), max_size=3),  # absurd sizes
    st.lists(st.integers(-3, 3), max_size=3),  # negative dims
    st.just([]), st.just([[2, 3], [4]]), st.just("?"), st.none())
concrete = st.one_of(
    st.just(""), st.integers(-5, 1 << 40).map(str), st.floats(allow_nan=True).map(repr),
    st.sampled_from(["2.", "0.", "True", "False", "-1", "[-1]", "[0, 1]", "[1.5]", "[]",
                     "'mean'", "abc", "1e400", "nan", "inf", "[[1]]", "[True, False, True]",
                     "(", "None", "-inf", "[" * 5]),
    st.lists(st.integers(-4, 4), max_size=4).map(str))


@st.composite
def recorded(draw, name):
    """One recorded argument list for op `name`: each argument made to fit its schema
    argument most of the time, anything at all otherwise; sometimes too short or too long."""
    schema = draw(st.sampled_from(schemas_for(name, use_torch=False)))
    n = len(schema.args) + draw(st.sampled_from([0, 0, 0, 0, -1, -2, 1, 2]))
    all_dims, types, values = [], [], []
    for i in range(max(n, 0)):
        arg = schema.args[i] if i < len(schema.args) else None
        fit = arg is not None and draw(st.integers(0, 4)) > 0
        if fit and arg is not None and arg.is_tensor:
            types.append(draw(st.sampled_from([*DTYPES[:8], ""])))
            all_dims.append(draw(st.lists(st.integers(0, 40), min_size=1, max_size=4)))
            values.append("")
        elif fit and arg is not None:
            kind = "ScalarList" if arg.is_list else draw(st.sampled_from(["Scalar", ""]))
            types.append(kind)
            all_dims.append([])
            values.append(draw(concrete))
        else:
            types.append(draw(st.sampled_from(DTYPES + KINDS)))
            all_dims.append(draw(dims))
            values.append(draw(concrete))
    if draw(st.booleans()):
        values = []  # an older trace: no Concrete Inputs at all
    return all_dims, types, values


@pytest.mark.parametrize("name", OPS)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_no_argument_list_ends_the_command(name, data) -> None:
    all_dims, types, values = data.draw(recorded(name))
    price = price_call(make_call(name, all_dims, types, values), replay=False)
    assert price.priced or price.reason
    assert not price.reason.startswith(INTERNAL_ERROR), price.reason
    if price.ledger is not None:
        assert price.ledger.flops >= 0 and price.ledger.read_bytes >= 0


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(OPS), data=st.data())
def test_no_argument_list_ends_the_command_with_replay(name, data) -> None:
    """With torch installed the ops the library leaves to the tracer are replayed on meta
    tensors: a failed replay is a reason too."""
    pytest.importorskip("torch")
    all_dims, types, values = data.draw(recorded(name))
    price = price_call(make_call(name, all_dims, types, values))
    assert price.priced or price.reason
    assert not price.reason.startswith(INTERNAL_ERROR), price.reason
