"""Recorded arguments read by name against the op's schema, never by position."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from roofwise.traces import schema_table
from roofwise.traces.aten import make_call
from roofwise.traces.prices import INTERNAL_ERROR, price_call
from roofwise.traces.replay import first_sentence
from roofwise.traces.schemas import UNKNOWN, Bound, bind, parse_schema

BF16 = "c10::BFloat16"
ROOT = Path(__file__).parent.parent.parent


def norm_call(x, ord_text, dim_text, keepdim="False"):
    """aten::linalg_vector_norm(self, ord, dim, keepdim, *, dtype) as PyTorch 2.x records
    `x.norm(p=..., dim=...)`."""
    return make_call("aten::linalg_vector_norm", [x, [], [], [], []],
                     [BF16, "Scalar", "ScalarList", "Scalar", ""],
                     ["", ord_text, dim_text, keepdim, ""])


def test_vector_norm_with_a_float_ord_is_priced_not_a_crash() -> None:
    # ord recorded as `2.`: read by position it was taken for the dims and iterated
    price = price_call(norm_call([4, 1024, 768], "2.", "[-1]"))
    ledger = price.ledger
    assert ledger is not None, price.reason
    x = np.empty((4, 1024, 768), np.float16)
    assert ledger.tensor("out").shape == (4, 1024)
    assert ledger.read_bytes == x.nbytes and ledger.write_bytes == 4 * 1024 * 2
    assert ledger.flops == 2 * x.size  # square-accumulate per element


def test_vector_norm_with_an_int_ord_reduces_the_recorded_dim() -> None:
    # ord `2`, dim [1]: by position the 2 was read as the dim (axis 2)
    ledger = price_call(norm_call([4, 1024, 768], "2", "[1]")).ledger
    assert ledger is not None and ledger.tensor("out").shape == (4, 768)
    kept = price_call(norm_call([4, 1024, 768], "2", "[1]", keepdim="True")).ledger
    assert kept is not None and kept.tensor("out").shape == (4, 1, 768)


def test_an_argument_that_fits_no_schema_leaves_the_op_blank_with_a_sentence() -> None:
    price = price_call(norm_call([4, 8], "2", "[1.5]"), replay=False)
    assert price.ledger is None
    assert price.reason == (
        "its recorded arguments fit none of the 2 schemas of aten::linalg_vector_norm "
        "(argument 2 (int[1]? dim) of aten::linalg_vector_norm was recorded as a list of "
        "scalars [1.5])")


def test_reductions_read_dim_and_keepdim_by_name() -> None:
    # mean.dim(self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype), as in the Qwen
    # trace: x (16, 559, 1024), dim [-1], keepdim True
    call = make_call("aten::mean", [[16, 559, 1024], [], [], []],
                     ["float", "ScalarList", "Scalar", ""], ["", "[-1]", "True", ""])
    ledger = price_call(call).ledger
    assert ledger is not None and ledger.tensor("out").shape == (16, 559, 1)
    # sum(self, *, dtype): no dim at all, the whole tensor
    whole = price_call(make_call("aten::sum", [[5, 128], []], ["float", ""]))
    assert whole.ledger is not None and whole.ledger.tensor("out").shape == ()
    assert whole.reason == ""


def test_keyword_only_arguments_and_defaults_are_named() -> None:
    schema = parse_schema("aten::linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None,"
                          " bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
    assert [a.name for a in schema.args] == ["self", "ord", "dim", "keepdim", "dtype"]
    assert [a.kwarg_only for a in schema.args] == [False] * 4 + [True]
    dim = schema.args[2]
    assert (dim.base, dim.is_list, dim.optional, dim.default) == ("int", True, True, None)
    out = parse_schema("aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, "
                       "Tensor(a!) out) -> Tensor(a!)").args[-1]
    assert out.is_tensor and out.mutable and out.kwarg_only and not out.has_default


def test_a_trace_from_an_older_pytorch_binds_with_the_newer_defaults() -> None:
    # PyTorch 2.6 records 15 arguments of _flash_attention_forward; 2.13's schema has 17
    q = [1, 141, 8, 64]
    bound = bind("aten::_flash_attention_forward", [tuple(q)] * 3 + [None] * 12,
                 [BF16] * 3 + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar",
                               "Scalar", "", "", "", ""],
                 ["", "", "", "", "", "141", "141", "0.", "False", "False", "0.125", "", "",
                  "", ""])
    assert isinstance(bound, Bound)
    assert bound.value("is_causal") is False and bound.value("scale") == 0.125
    assert bound.value("max_q") == 141 and bound.value("cum_seq_q", "x") is None
    assert bound.value("num_splits", "absent") in (None, "absent")


def test_values_the_profiler_did_not_record_are_unknown() -> None:
    # old traces: no Concrete Inputs
    bound = bind("aten::mean", [(5, 128), None, None, None], ["float", "", "Scalar", ""], [])
    assert isinstance(bound, Bound)
    assert bound.values["dim"] is UNKNOWN and bound.value("keepdim", "default") == "default"


def test_replay_errors_are_whole_sentences() -> None:
    message = ("Overloaded torch operator invoked from Python failed to match any schema:\n"
               "aten::_flash_attention_forward() Expected a value of type 'float' for ...")
    assert first_sentence(RuntimeError(message)) == (
        "Overloaded torch operator invoked from Python failed to match any schema.")
    assert first_sentence(ValueError("bad shape. more detail here. and more")) == "bad shape."
    assert first_sentence(KeyError()) == "KeyError."


def test_keyword_only_arguments_replay_by_name() -> None:
    """aten::arange.start_out(start, end, step, *, out) from the Qwen trace: it failed to
    replay with `out` passed by position; by name it replays (an allocation: no work)."""
    pytest.importorskip("torch")
    call = make_call("aten::arange", [[], [], [], [0]], ["Scalar", "Scalar", "Scalar",
                                                           "long int"], ["0", "559", "1", ""])
    price = price_call(call)
    assert price.ledger is not None and price.source == "tracer"
    assert not price.reason.startswith(INTERNAL_ERROR)


def test_the_shipped_schema_table_is_what_the_generator_writes() -> None:
    """The table is generated from torch's schemas (scripts/gen_schema_table.py), never by
    hand: with the torch that wrote it installed, regenerating changes nothing."""
    torch = pytest.importorskip("torch")
    if torch.__version__ != schema_table.TORCH_VERSION:
        pytest.skip(f"the table was written by torch {schema_table.TORCH_VERSION}")
    spec = importlib.util.spec_from_file_location("gen_schema_table",
                                                  ROOT / "scripts" / "gen_schema_table.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    shipped = (ROOT / "src" / "roofwise" / "traces" / "schema_table.py").read_text()
    assert gen.render(gen.table()) == shipped


def test_an_out_variant_recorded_outputs_first_binds() -> None:
    """PyTorch 1.x recorded an out= variant in C++ argument order, its out buffer first: as
    in hta_sampled_rank1, aten::cumsum (out, self long [300], dim, dtype)."""
    call = make_call("aten::cumsum", [[], [300], [], []], ["", "long", "Scalar", ""])
    price = price_call(call, replay=False)
    assert price.ledger is not None, price.reason
    assert price.ledger.read_bytes == 300 * 8 and price.ledger.write_bytes == 300 * 8
    assert price.ledger.flops == 300  # one add per element
