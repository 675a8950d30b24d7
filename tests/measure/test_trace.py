"""Ledgers traced from PyTorch: the case study's reference traces to the library's bytes exactly,
contractions count as PyTorch's FLOP counter counts them, and nothing is dropped silently."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from roofwise.base.errors import InputError  # noqa: E402
from roofwise.capture.tracer import trace, trace_ledger  # noqa: E402
from roofwise.cli import main  # noqa: E402
from roofwise.ledgers.files import load_ledger  # noqa: E402
from roofwise.ledgers.ledger import Role  # noqa: E402
from roofwise.measure.reference_ops import qk_norm_rope_quant_reference  # noqa: E402
from roofwise.ops.case_study import qk_norm_rope_quant  # noqa: E402

LOOKUPS = ("q_norm_weight", "k_norm_weight", "cos", "sin")
OUTPUTS = ("q_fp8", "q_scale", "k_fp8", "k_scale")
TARGET = "roofwise.measure.reference_ops:qk_norm_rope_quant_reference"


def case_inputs(tokens: int, device: str) -> tuple:
    gen = torch.Generator().manual_seed(0)

    def make(*shape, dtype=torch.float32):
        if device == "meta":
            return torch.empty(shape, dtype=dtype, device="meta")
        return torch.randn(shape, generator=gen).to(dtype)

    return (make(tokens, 32, 128, dtype=torch.bfloat16), make(tokens, 8, 128, dtype=torch.bfloat16),
            make(128, dtype=torch.bfloat16), make(128, dtype=torch.bfloat16),
            make(tokens, 128), make(tokens, 128))


def trace_case(tokens: int, device: str = "meta"):
    return trace(qk_norm_rope_quant_reference, *case_inputs(tokens, device), lookups=LOOKUPS,
                 output_names=OUTPUTS)


@pytest.mark.parametrize(("tokens", "device"), [(16, "cpu"), (16, "meta"), (4096, "meta")])
def test_fused_trace_of_the_case_study_equals_the_library_ledger(tokens, device):
    fused = trace_case(tokens, device).fused
    library = qk_norm_rope_quant(tokens=tokens)
    assert fused.bytes == library.bytes
    assert fused.read_bytes == library.read_bytes
    assert fused.write_bytes == library.write_bytes
    assert fused.lookup_bytes == library.lookup_bytes
    roles = {t.name: t.role for t in fused.tensors}
    assert roles == {"q": Role.INPUT, "k": Role.INPUT, **dict.fromkeys(LOOKUPS, Role.LOOKUP),
                     **dict.fromkeys(OUTPUTS, Role.OUTPUT)}
    assert fused.roof == "cuda_core.fp32"


def test_fused_bytes_at_4096_by_formula():
    fused = trace_case(4096).fused
    rows = 4096 * (32 + 8)
    payload = rows * 128 * (2 + 1) + rows * 4      # bf16 in, fp8 out, one fp32 scale per row
    lookups = 2 * 128 * 2 + 2 * 4096 * 128 * 4     # two bf16 weights, fp32 cos and sin
    assert fused.bytes == payload + lookups == 67_764_736
    assert fused.lookup_bytes == lookups
    assert fused.write_bytes == rows * 128 + rows * 4


def test_reference_quantises_to_one_scale_per_row():
    q, k, qw, kw, cos, sin = case_inputs(4, "cpu")
    q_fp8, q_scale, k_fp8, k_scale = qk_norm_rope_quant_reference(q, k, qw, kw, cos, sin)
    assert q_fp8.dtype == torch.float8_e4m3fn and q_scale.shape == (4, 32)
    assert k_fp8.shape == (4, 8, 128) and k_scale.dtype == torch.float32
    # the largest |value| of every row lands on the fp8 maximum
    assert torch.allclose(q_fp8.float().abs().amax(-1), torch.full((4, 32), 448.0))
    # dequantised q is the normalised rotated row (independent fp32 recompute, fp8 tolerance)
    xf = q.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * qw.float()).bfloat16()
    n = normed.float()
    roped = n * cos[:, None] + torch.cat((-n[..., 64:], n[..., :64]), -1) * sin[:, None]
    assert torch.allclose(q_fp8.float() * q_scale[..., None], roped, rtol=0.07, atol=0.02)


def test_unfused_ledger_pays_every_intermediate():
    traced = trace_case(16)
    fused, unfused = traced.fused, traced.unfused
    kernels = [op for op in traced.ops if op.launches_kernel]
    assert unfused.calls == len(kernels) == len(unfused.stages)
    assert unfused.bytes > 2 * fused.bytes
    written = {t.name.split("/", 1)[1] for t in unfused.tensors if t.role is Role.OUTPUT}
    read = {t.name.split("/", 1)[1] for t in unfused.tensors if t.role is Role.INPUT}
    intermediates = {n for n in written if n.startswith("t")}
    assert len(intermediates) == len(kernels) - len(OUTPUTS)
    assert intermediates <= read                  # each one written, then read back
    assert set(OUTPUTS) <= written
    # q's bf16 intermediates, by reading the reference: normed (cast back to bf16, read by one
    # cast), roped (read by abs for the amax and by the cast before scaling), |roped| (by amax)
    roles: dict[str, list[str]] = {}
    for t in unfused.tensors:
        name = t.name.split("/", 1)[1]
        if t.shape == (16, 32, 128) and t.dtype == "bf16" and name != "q":
            roles.setdefault(name, []).append(t.role.value)
    assert sorted(roles.values()) == [["output", "input"], ["output", "input"],
                                      ["output", "input", "input"]]


def elementwise(x, y):
    return torch.exp(x * y) + 1


def test_hand_counted_chain_fused_and_unfused():
    x, y = torch.empty(4, 8, device="meta"), torch.empty(4, 8, device="meta")
    traced = trace(elementwise, x, y)
    elem_bytes = 4 * 8 * 4
    assert traced.fused.bytes == 3 * elem_bytes          # x, y read; out written
    # mul: x, y -> t0; exp: t0 -> t1; add: t1 -> out
    assert traced.unfused.bytes == (3 + 2 + 2) * elem_bytes
    assert traced.unfused.calls == 3
    assert traced.fused.ops_by_unit == {"cuda_core.fp32": 64.0, "sfu.fp32": 32.0}
    assert traced.fused.ops_by_class == {"arithmetic": 64.0, "transcendental": 32.0}


def test_exp_lands_on_the_special_function_unit():
    ledger = trace_ledger(torch.exp, torch.empty(3, 5, device="meta"))
    assert ledger.ops_by_unit == {"sfu.fp32": 15.0}
    assert [w.op_class for w in ledger.work] == ["transcendental"]


def test_reductions_count_input_elements_and_pow_by_int_is_arithmetic():
    def sum_of_squares(x):
        return x.pow(2).sum(-1)

    ledger = trace_ledger(sum_of_squares, torch.empty(6, 10, device="meta"))
    assert ledger.ops_by_class == {"arithmetic": 120.0}  # 60 squares + 60 adds
    root = trace_ledger(lambda x: x.pow(0.5), torch.empty(6, 10, device="meta"))
    assert root.ops_by_class == {"transcendental": 60.0}


def test_matmul_flops_equal_pytorch_flop_counter():
    x = torch.randn(64, 128).bfloat16()
    w = torch.randn(128, 256).bfloat16()
    counter = FlopCounterMode(display=False)
    with counter:
        torch.matmul(x, w)
    ledger = trace_ledger(torch.matmul, x, w)
    assert ledger.flops == counter.get_total_flops() == 2 * 64 * 128 * 256
    assert ledger.ops_by_unit == {"tensor_core.bf16": 2 * 64 * 128 * 256}
    assert ledger.roof == "tensor_core.bf16"
    assert ledger.bytes == (64 * 128 + 128 * 256 + 64 * 256) * 2


def test_linear_and_fp32_contraction_units():
    x, w, b = (torch.empty(*s, device="meta") for s in ((32, 64), (16, 64), (16,)))
    counter = FlopCounterMode(display=False)
    with counter:
        torch.nn.functional.linear(x, w, b)
    plain = trace_ledger(torch.nn.functional.linear, x, w, b)
    assert plain.flops == counter.get_total_flops() == 2 * 32 * 64 * 16
    assert plain.roof == "cuda_core.fp32"
    assert trace_ledger(torch.nn.functional.linear, x, w, b, tf32=True).roof == "tensor_core.tf32"


def test_unknown_op_is_reported_uncounted_not_dropped():
    traced = trace(torch.digamma, torch.empty(4, 4, device="meta"))
    assert traced.uncounted == ("aten.digamma.default",)
    assert traced.fused.flops == 0
    assert traced.fused.bytes == 2 * 4 * 4 * 4  # its bytes still count
    assert any("aten.digamma.default" in note for note in traced.fused.notes)
    assert any("aten.digamma.default" in note for note in traced.unfused.notes)


def test_input_views_unread_inputs_and_in_place_roles():
    big = torch.empty(8, 128, device="meta")

    def first_only(a, b):
        return a * 2

    ledger = trace_ledger(first_only, big[:, :64], torch.empty(1000, device="meta"))
    assert [t.name for t in ledger.tensors] == ["a", "out"]
    assert ledger.tensor("a").nbytes == 8 * 64 * 4         # its own bytes, not the storage's

    def accumulate(acc, x):
        acc.add_(x)

    ledger = trace_ledger(accumulate, torch.empty(8, 8, device="meta"),
                          torch.empty(8, 8, device="meta"), lookups=(1,))
    assert {t.name: t.role for t in ledger.tensors} == {"acc": Role.INOUT, "x": Role.LOOKUP}
    assert ledger.bytes == 3 * 8 * 8 * 4


def test_bad_arguments_are_input_errors():
    x = torch.empty(2, device="meta")
    with pytest.raises(InputError, match="mode"):
        trace_ledger(torch.exp, x, mode="both")
    with pytest.raises(InputError, match="no tensor argument named nope"):
        trace(elementwise, x, x, lookups=("nope",))


# ---- the command ----------------------------------------------------------------------------

SHAPES = ("--shape", "q=4096x32x128:bf16", "--shape", "k=4096x8x128:bf16",
          "--shape", "q_norm_weight=128:bf16", "--shape", "k_norm_weight=128:bf16",
          "--shape", "cos=4096x128:fp32", "--shape", "sin=4096x128")
LOOKUP_ARGS = tuple(a for name in LOOKUPS for a in ("--lookup", name))


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_command_prints_and_writes_the_fused_ledger(capsys, tmp_path):
    code, out, _ = run(capsys, "trace", TARGET, *SHAPES, *LOOKUP_ARGS)
    assert code == 0
    assert "bytes 67,764,736" in out and "lookups 4,194,816" in out
    path = tmp_path / "ledger.yaml"
    code, _, _ = run(capsys, "trace", TARGET, *SHAPES, *LOOKUP_ARGS, "-o", str(path))
    assert code == 0
    ledger = load_ledger(path)
    assert ledger.bytes == 67_764_736
    assert ledger.lookup_bytes == qk_norm_rope_quant().lookup_bytes


def test_command_unfused_round_trips_and_prices(capsys, tmp_path):
    path = tmp_path / "unfused.yaml"
    code, _, _ = run(capsys, "trace", TARGET, *SHAPES, "--unfused", "-o", str(path))
    assert code == 0
    expected = trace_case(4096).unfused
    loaded = load_ledger(path)
    assert (loaded.bytes, loaded.calls, loaded.flops) == (expected.bytes, expected.calls,
                                                          expected.flops)
    code, out, _ = run(capsys, "trace", TARGET, *SHAPES, *LOOKUP_ARGS, "--machine", "h200")
    assert code == 0
    assert "SOL" in out and "15.051 us" in out   # the seed's SOL at 4502.4 GB/s


@pytest.mark.parametrize(("args", "needle"), [
    (("nosuch.module:f", "--shape", "x=2"), "cannot import module"),
    (("roofwise.measure.reference_ops:nosuch", "--shape", "x=2"), "no function 'nosuch'"),
    (("roofwise.measure.reference_ops", "--shape", "x=2"), "expected module.path:function"),
    ((TARGET, "--shape", "q=4096by32:bf16"), "--shape q: expected DIMS like"),
    ((TARGET, "--shape", "4096x32"), "expected NAME=DIMS"),
    ((TARGET, "--shape", "q=4xx4:bf16", "--shape", "k=4x4"), "--shape q: expected DIMS"),
    ((TARGET, "--shape", "q=4:bf16", "--shape", "k=0x4"), "--shape k: every dimension must be "
                                                          "positive, got '0x4'"),
    ((TARGET, "--shape", "q=4:fp4"), "--shape q dtype: dtype 'fp4' has no torch"),
    (("torch:relu", "--shape", "input=4x4"), "trace torch:relu: has no Python signature"),
    ((TARGET, "--shape", "q=4096:bf17"), "unknown dtype 'bf17'"),
    ((TARGET, "--shape", "q=4:bf16"), "needs a --shape for k"),
    ((TARGET, *SHAPES, "--shape", "z=4"), "no parameter 'z'"),
])
def test_command_bad_input_is_one_line_exit_2(capsys, args, needle):
    code, _, err = run(capsys, "trace", *args)
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1


def test_command_without_torch_says_how_to_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    monkeypatch.delitem(sys.modules, "roofwise.capture.tracer")
    code, _, err = run(capsys, "trace", TARGET, *SHAPES)
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("roofwise: error: trace: trace needs torch: pip install -e '.[gpu]'")


def test_shape_dtypes_are_roofwise_names(capsys):
    from roofwise.capture.inputs import parse_shape_spec, torch_dtype

    spec = parse_shape_spec("a=4x8:fp8")
    assert (spec.name, spec.dims, spec.dtype) == ("a", (4, 8), "fp8")
    assert torch_dtype(spec.dtype, "x", torch) is torch.float8_e4m3fn
    assert torch_dtype("fp8_e5m2", "x", torch) is torch.float8_e5m2
    assert parse_shape_spec("b=16").dtype == "fp32"


def returns_a_number(x):
    return 3


def returns_nothing(x):
    x * 2  # computed, neither returned nor written anywhere


def returns_a_pair_with_a_number(x):
    return x * 2, 1.5


@pytest.mark.parametrize(("fn", "got"), [(returns_a_number, "int"), (returns_nothing, "NoneType"),
                                         (returns_a_pair_with_a_number, "float")])
def test_a_function_that_returns_no_tensor_is_an_error(fn, got):
    with pytest.raises(InputError, match=f"returned {got}; expected a tensor"):
        trace(fn, torch.empty(4, device="meta"))


def test_contraction_units_come_from_the_operator_library():
    a = torch.empty(4, 4, dtype=torch.float64, device="meta")
    with pytest.raises(InputError, match="no contraction unit for dtype 'fp64'"):
        trace_ledger(torch.mm, a, a)  # no invented tensor_core.fp64 / cuda_core.fp64 key
    h = torch.empty(4, 4, dtype=torch.float16, device="meta")
    assert trace_ledger(torch.mm, h, h).roof == "tensor_core.fp16"


def test_a_module_in_the_current_directory_imports(capsys, tmp_path, monkeypatch):
    (tmp_path / "rw_local_mod.py").write_text("def double(x):\n    return x * 2\n\n\n"
                                              "def mm(a, b):\n    return a @ b\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "rw_local_mod", raising=False)
    before = list(sys.path)
    code, out, err = run(capsys, "trace", "rw_local_mod:double", "--shape", "x=8")
    assert code == 0, err
    assert "bytes 64" in out  # 8 fp32 read, 8 written
    assert sys.path == before  # the current directory is not left behind
    # the fp8 alias of ledger YAML works in --shape too: e4m3, on the fp8 tensor cores
    code, out, err = run(capsys, "trace", "rw_local_mod:mm", "--shape", "a=4x8:fp8",
                         "--shape", "b=8x16:fp8")
    assert code == 0, err
    assert "roof tensor_core.fp8" in out and "fp8_e4m3" in out


@pytest.mark.parametrize(("dims", "needle"), [
    # 1e23 x 4 fp32 = 1.6e24 bytes: past int64 before torch could even unpack the size
    ("99999999999999999999999x4", "--shape x: 99999999999999999999999x4 of fp32 is 1.6e+24 "
                                  "bytes, more than a torch tensor can address"),
    # each size fits int64, their byte count (4e22) does not: torch's storage overflow
    ("9999999999999x999999999", "--shape x: 9999999999999x999999999 of fp32 is 4e+22 bytes"),
])
def test_a_shape_past_int64_bytes_is_one_line(capsys, tmp_path, monkeypatch, dims, needle):
    (tmp_path / "rw_huge_mod.py").write_text("def rms(x, w):\n    return x * w\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "rw_huge_mod", raising=False)
    code, out, err = run(capsys, "trace", "rw_huge_mod:rms", "--shape", f"x={dims}",
                         "--shape", "w=4")
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


def test_a_large_shape_within_int64_traces_on_meta(capsys, tmp_path, monkeypatch):
    # 2**31 x 2**20 fp32 = 2**53 bytes: no memory on meta tensors, so it traces
    (tmp_path / "rw_big_mod.py").write_text("def double(x):\n    return x * 2\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "rw_big_mod", raising=False)
    code, out, err = run(capsys, "trace", "rw_big_mod:double", "--shape",
                         f"x={2**31}x{2**20}")
    assert code == 0, err
    assert f"bytes {2 * 2**53:,}" in out


def test_a_name_that_is_not_callable_says_so(capsys, tmp_path, monkeypatch):
    (tmp_path / "rw_odd_mod.py").write_text("h = 5\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "rw_odd_mod", raising=False)
    code, _, err = run(capsys, "trace", "rw_odd_mod:h", "--shape", "x=4")
    assert code == 2
    assert err == ("roofwise: error: trace rw_odd_mod:h: 'h' in rw_odd_mod is not callable; "
                   "expected a function\n")
    code, _, err = run(capsys, "trace", "rw_odd_mod:zz", "--shape", "x=4")
    assert code == 2 and "module 'rw_odd_mod' has no function 'zz'" in err


@pytest.mark.parametrize(("fn", "by_class", "nbytes"), [
    # 6 x 10 fp32 in; counted per input element, bytes of what is read and written
    (torch.nn.functional.softplus, {"transcendental": 120.0, "compare": 60.0}, 2 * 240),
    (lambda x: x.std(-1), {"arithmetic": 180.0}, 240 + 6 * 4),
    (lambda x: torch.polar(x, x), {"transcendental": 120.0, "arithmetic": 120.0},
     240 + 60 * 8),  # one input read for both arguments; complex64 out
    (lambda x: torch.topk(x, 3, dim=-1), {"compare": 60.0}, 240 + 6 * 3 * (4 + 8)),
    (lambda x: torch.histc(x, bins=7), {"compare": 60.0}, 240 + 7 * 4),
])
def test_ops_models_call_are_counted(fn, by_class, nbytes):
    # softplus (Ergo's and Laguna's residual gates), std (Gemma-3n), polar (Llama-4's rope),
    # topk and histc (MoE routing) were "the tracer has no count" rows of model projections
    ledger = trace_ledger(fn, torch.empty(6, 10, device="meta"))
    assert ledger.ops_by_class == by_class
    assert ledger.bytes == nbytes
