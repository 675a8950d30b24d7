"""Which ledger each report row shows: a --reference by op name, else the operator library."""

from __future__ import annotations

from pathlib import Path

from roofwise.ledgers.files import load_ledger
from roofwise.records.read import read_records
from roofwise.render.row_ledgers import NO_LEDGER, LedgerFinder, NoLedger, Reference, RowLedger

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "records.jsonl"
FUSED = ROOT / "examples" / "qk_norm_rope_quant.yaml"

# the fused case study by hand: q 4096x32x128 bf16, k 4096x8x128 bf16, two 128-wide bf16 norm
# weights, cos and sin 4096x128 fp32 read; q and k in fp8 and their per-head fp32 scales written
Q_B = 4096 * 32 * 128 * 2  # 33,554,432
READ_B = Q_B + 4096 * 8 * 128 * 2 + 2 * 128 * 2 + 2 * 4096 * 128 * 4  # 46,137,856
WRITE_B = 4096 * 32 * 128 + 4096 * 8 * 128 + 4096 * 32 * 4 + 4096 * 8 * 4  # 21,626,880


def _rows() -> list[dict[str, object]]:
    return [dict(r) for r in read_records(EXAMPLES).columns.rows or ()]


def test_hand_counts_are_the_case_study() -> None:
    assert (Q_B, READ_B, WRITE_B, READ_B + WRITE_B) == (33_554_432, 46_137_856, 21_626_880,
                                                         67_764_736)


def test_library_builds_rows_whose_workload_names_the_ops_parameters() -> None:
    rows = _rows()
    found = [LedgerFinder().find(r) for r in rows]
    built = [(r["op"], f.ledger.bytes) for r, f in zip(rows, found, strict=True)
             if isinstance(f, RowLedger)]
    # the four qk rows (three carry a text note, ignored), and softmax; not gemm_bf16 (no
    # such operator) nor rmsnorm (its `tokens` is not a parameter: rmsnorm takes `rows`)
    assert built == [("qk_norm_rope_quant", 67_764_736), ("qk_norm_rope_quant", 67_764_736),
                     ("qk_norm_rope_quant", 17_056), ("qk_norm_rope_quant", 67_764_736),
                     ("softmax", 4096 * 8192 * 2 * 2)]
    fused, split, decode, payload = found[:4]
    assert isinstance(fused, RowLedger) and fused.differences == () and fused.ignored == ()
    assert fused.source == ("operator library: qk_norm_rope_quant(tokens=4096, q_heads=32, "
                            "kv_heads=8, head_dim=128)")
    assert fused.defaults == ("lookups=per_call", "in_dtype=bf16", "out_dtype=fp8_e4m3",
                              "table_dtype=fp32")
    assert fused.ledger.tensor("q").nbytes == Q_B
    assert fused.ledger.read_bytes == READ_B and fused.ledger.write_bytes == WRITE_B
    # one token: 32+8 heads of 128 bf16 in, fp8 out, plus weights and one cos/sin row
    assert isinstance(decode, RowLedger) and decode.differences == ()
    assert decode.ledger.bytes == (40 * 128 * 2 + 512 + 2 * 128 * 4) + (40 * 128 + 40 * 4)
    assert isinstance(split, RowLedger) and split.ignored == ("note",)
    assert split.differences == (
        "bytes: the record counts 151,650,816 B, this ledger 67,764,736 B "
        "(the record 83,886,080 B more)",)
    assert isinstance(payload, RowLedger) and payload.differences == (
        "bytes: the record counts 63,569,920 B, this ledger 67,764,736 B "
        "(the record 4,194,816 B fewer)",)  # cos, sin and the norm weights left out
    gemm, gemm2, rmsnorm, softmax = found[4:]
    assert isinstance(gemm, NoLedger) and isinstance(gemm2, NoLedger)
    assert [gemm.text, gemm2.text] == [NO_LEDGER] * 2  # gemm_bf16 is not an operator
    assert isinstance(rmsnorm, NoLedger) and rmsnorm.text == (
        f"{NO_LEDGER}; workload key 'tokens' is not a parameter of the library's rmsnorm "
        "(expected: rows, hidden, dtype, weight, out_dtype)")
    # softmax at the default bf16: the record's fp32-sized bytes and its FLOPs both differ
    assert isinstance(softmax, RowLedger) and softmax.defaults == ("dtype=bf16",
                                                                   "out_dtype=auto")
    assert [d.split(":")[0] for d in softmax.differences] == ["bytes", "flops"]


def test_reference_wins_by_op_name_case_blind_and_is_named() -> None:
    ref = Reference(load_ledger(FUSED), "examples/qk_norm_rope_quant.yaml")
    rows = _rows()
    decode = dict(rows[2], op="QK_Norm_Rope_Quant")
    found = LedgerFinder([ref]).find(decode)
    assert isinstance(found, RowLedger) and found.ledger is ref.ledger
    assert found.source == "reference examples/qk_norm_rope_quant.yaml (qk_norm_rope_quant)"
    assert found.defaults == () and found.ignored == ()
    # the one-token record against the 4096-token reference: both numbers differ, said so
    assert found.differences == (
        "bytes: the record counts 17,056 B, this ledger 67,764,736 B "
        "(the record 67,747,680 B fewer)",
        "flops: the record counts 46,200, this ledger 189,235,200 "
        "(the record 189,189,000 fewer)")


def test_workloads_that_do_not_build_say_why() -> None:
    finder = LedgerFinder()
    base = {"op": "softmax", "flops": 1.0, "bytes": 1.0}
    text = finder.find(dict(base, workload="rows=4096"))
    assert isinstance(text, NoLedger) and text.why == (
        "the operator library has softmax, but this record's workload is not a mapping of its "
        "parameters")
    note_only = finder.find(dict(base, workload={"note": "fp32"}))
    assert isinstance(note_only, NoLedger) and "names none of" in note_only.why
    zero = finder.find(dict(base, workload={"rows": 0}))
    assert isinstance(zero, NoLedger) and zero.why.startswith(
        "the library's softmax does not build from this workload: ") and "rows" in zero.why
    two = finder.find(dict(base, workload={"tokens": 1, "hidden": 2}))
    assert isinstance(two, NoLedger) and "keys 'tokens', 'hidden' are not parameters" in two.why
    assert isinstance(finder.find(dict(base, workload=None)), NoLedger)
    # a bool and a tuple reach the registry as its own text forms
    rms = finder.find({"op": "rmsnorm", "workload": {"rows": 2, "hidden": 4, "weight": False},
                       "flops": 0, "bytes": 0})
    assert isinstance(rms, RowLedger) and "weight=false" in rms.source
    assert [t.name for t in rms.ledger.tensors] == ["x", "y"]  # no weight read
