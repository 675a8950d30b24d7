"""The eight ways to read a roofline wrong, rebuilt from library objects.

Every figure comes from a profile, a ledger, a price or a verdict. Where the seed itself
slipped (tests/fixtures/seed/NOTES.md), the honest figure is shown and the seed's beside
it, labelled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops.case_study import qk_norm_rope_quant, qk_norm_rope_quant_split
from roofwise.pricing.core import cycles_by_unit, price_columns, price_ledger
from roofwise.profiles.load import builtin_machines
from roofwise.profiles.machine import Machine
from roofwise.verdicts.rules import (
    ANOMALY_EFFICIENCY,
    AT_CEILING_EFFICIENCY,
    VERDICTS,
    dram_bytes_at_least,
    judge,
)

# The seed's own two-kernel figure for M4 (roofline_misuse.py): 6 B/elem of payload plus the
# lookups twice. It follows from no decomposition; shown only beside the honest figure.
SEED_M4_TWO_KERNEL_BYTES = 2 * 20_971_520 * 2 + 2 * 20_971_520 + 163_840 * 4 + 4_194_304 * 2
# The seed's decode step (M7) counted only the payload.
SEED_M7_DECODE_BYTES = 15_520
# Hypothetical kernel times, for showing verdicts: nothing here is measured.
HYPOTHETICAL_PREFILL_TIME_S = 14.0e-6
HYPOTHETICAL_DECODE_TIME_S = 4.0e-6
HYPOTHETICAL_BIG_TOKENS = 32768  # a working set well beyond the H200's L2
HYPOTHETICAL_BIG_TIME_S = 80.0e-6
SOFTMAX_SCORES = 8192


@dataclass(frozen=True)
class Context:
    machine: Machine
    ascend: Machine
    ledger: Ledger
    rows: int
    head_dim: int


@dataclass(frozen=True)
class Demo:
    code: str
    title: str
    lines: tuple[str, ...]


def context() -> Context:
    machines = builtin_machines()
    ledger = qk_norm_rope_quant()
    rows = sum(t.elements for t in ledger.tensors if t.name.endswith("_scale"))
    return Context(machines["h200"], machines["ascend-a5-vector"], ledger, rows,
                   ledger.tensor("q").shape[-1])


def header(ctx: Context) -> list[str]:
    bw = ctx.machine.dram.effective_bytes_per_s() or 0.0
    return [
        "operator : QK-Norm + RoPE + fp8 quant (roofwise.ops.qk_norm_rope_quant, fused)",
        f" {ctx.rows} rows of {ctx.head_dim} elements, {ctx.ledger.flops / 1e6:.1f} MFLOP, "
        f"{ctx.ledger.bytes / 1e6:.2f} MB ideal",
        f"machine : {ctx.machine.display_name} (profile {ctx.machine.name}), {bw / 1e9:.1f} GB/s "
        f"effective ({ctx.machine.dram.name} {ctx.machine.dram.envelope_mix} mix, the envelope)",
    ]


def m1(ctx: Context) -> Demo:
    unit = ctx.machine.units["tensor_core.fp16"]
    flops = ctx.ledger.flops
    spec = unit.theoretical_ops_per_s or 0.0
    burst, sustained = unit.effective_ops_per_s("burst") or 0.0, unit.effective_ops_per_s(
        "sustained") or 0.0
    hbm = ctx.machine.dram
    return Demo("M1", "using the datasheet peak instead of a calibrated rate", (
        f" datasheet fp16 tensor   {spec / 1e12:8.1f} TFLOP/s -> compute time "
        f"{flops / spec * 1e6:8.3f} us",
        f" burst fp16 tensor       {burst / 1e12:8.1f} TFLOP/s -> compute time "
        f"{flops / burst * 1e6:8.3f} us  "
        "(the figure the original demonstration called 'calibrated')",
        f" sustained fp16 tensor   {sustained / 1e12:8.1f} TFLOP/s -> compute time "
        f"{flops / sustained * 1e6:8.3f} us",
        f" datasheet understates the time by {spec / burst:.2f}x (burst) to "
        f"{spec / sustained:.2f}x (sustained)",
        " Correction to the original demonstration (roofline_misuse.py): it called the burst "
        "rate 'calibrated'. Both regimes are "
        f"measured: sustained {unit.calibration('sustained'):.4f} "
        f"(~{unit.calibration('sustained'):.2f} of peak under the 700 W cap) and burst "
        f"{unit.calibration('burst'):.4f} "
        f"(~{unit.calibration('burst'):.2f}).",
        " roofwise keeps both (TileOPs h200.yaml:31-34), says which one a reading used, and "
        "judges anomalies against the higher (the envelope).",
        f" same lesson on the memory side: {(hbm.theoretical_bytes_per_s or 0) / 1e9:.0f} GB/s "
        f"spec -> {(hbm.effective_bytes_per_s() or 0) / 1e9:.0f} GB/s envelope "
        f"({hbm.envelope_mix} mix; copy {(hbm.effective_bytes_per_s('copy') or 0) / 1e9:.0f} GB/s)",
    ))


def m2(ctx: Context) -> Demo:
    ai = ctx.ledger.intensity_flops_per_byte
    lines = [f" operator: {ctx.ledger.flops / 1e6:.1f} MFLOP over {ctx.ledger.bytes / 1e6:.2f} "
             f"MB -> AI = {ai:.2f} FLOP/Byte"]
    balances = {}
    for key in ("tensor_core.fp16", "tensor_core.bf16", "tensor_core.fp8", "cuda_core.fp32"):
        balance = ctx.machine.balance_flops_per_byte(key) or 0.0
        balances[key] = balance
        bound = "memory-bound" if ai < balance else "COMPUTE-bound"
        lines.append(f" {key:<18} balance {balance:7.2f} FLOP/Byte -> {bound}")
    lines += [
        f" the ledger declares roof {ctx.ledger.roof}: no stage has a contraction, so an optimal",
        " implementation runs on CUDA cores and only the last row prices it honestly",
        " (TileOPs roofline.md:63-70: the roof names the unit an optimal implementation uses).",
        " A tensor-core roof moves the balance point by "
        f"{balances['tensor_core.fp16'] / balances['cuda_core.fp32']:.1f}x: enough to flip the "
        "verdict of a heavier per-element body.",
    ]
    return Demo("M2", "pricing an elementwise operator against the tensor-core roof",
                tuple(lines))


def m3(ctx: Context) -> Demo:
    b = {k: ctx.machine.balance_flops_per_byte(k) or 0.0
         for k in ("tensor_core.fp8", "tensor_core.fp16", "cuda_core.fp32")}
    return Demo("M3", "declaring the roof from the input dtype instead of from the algorithm", (
        " an fp8 attention that reads this kernel's output is not an fp8-roof kernel because its"
        " inputs are fp8:",
        " its contraction may run in bf16 or fp16, and its softmax runs on CUDA cores and the SFU.",
        f" balance points: fp8 {b['tensor_core.fp8']:.2f}, fp16 {b['tensor_core.fp16']:.2f}, "
        f"cuda-core {b['cuda_core.fp32']:.2f} FLOP/Byte",
        " a roofwise ledger declares the unit of each piece of work; nothing infers it from a "
        "dtype.",
        " TileSight's authors call the bounds of existing tools coarse (arXiv 2607.22432).",
    ))


def m4(ctx: Context) -> Demo:
    fused = ctx.ledger
    split = qk_norm_rope_quant_split()
    seed_ai = fused.flops / SEED_M4_TWO_KERNEL_BYTES
    stages = ", ".join(f"{s.name} {s.bytes / 1e6:.2f} MB" for s in split.stages)
    return Demo("M4", "computing AI on one stage and applying it to the fused kernel", (
        f" as two kernels : {split.bytes / 1e6:8.2f} MB, AI = {split.intensity_flops_per_byte:.2f}"
        f"  ({split.bytes:,} B: {stages})",
        f" as one kernel  : {fused.bytes / 1e6:8.2f} MB, AI = {fused.intensity_flops_per_byte:.2f}",
        f" the split moves {split.bytes / fused.bytes:.2f}x the fused bytes; reading the fused "
        f"kernel with the split AI understates it by "
        f"{fused.intensity_flops_per_byte / split.intensity_flops_per_byte:.2f}x",
        f" the original demonstration's two-kernel figure, {SEED_M4_TWO_KERNEL_BYTES / 1e6:.2f} MB "
        f"(AI = {seed_ai:.2f}, {fused.intensity_flops_per_byte / seed_ai:.2f}x), follows from "
        "no decomposition:",
        " it counts 6 B/elem of payload and the lookups twice. roofwise derives the split from "
        "its stages.",
    ))


def m5(ctx: Context) -> Demo:
    n = SOFTMAX_SCORES
    exp_ops, other_ops = n, 4 * n
    alu = ctx.ascend.units["ascend_vector.alu"].ops_per_cycle or 0.0
    div = ctx.ascend.units["ascend_vector.div"].ops_per_cycle or 0.0
    sfu = ctx.ascend.units["ascend_vector.sfu"].ops_per_cycle or 0.0
    row = softmax_row_ledger("ascend_vector.alu", "ascend_vector.sfu")
    cycles = cycles_by_unit(row.ops_by_unit, ctx.ascend)
    per_pipe_serial = sum(cycles.values())
    per_pipe_max = max(cycles.values())
    unweighted = row.flops / alu
    nv = softmax_row_ledger("cuda_core.fp32", "sfu.fp32")
    nv_price = price_ledger(nv, ctx.machine)
    return Demo("M5", "charging a transcendental the same as a multiply", (
        f" a softmax row of {n} scores: {exp_ops} exp + {other_ops} other ops "
        "(scale, running max, subtract, running sum)",
        f" ledger says : {row.flops / 1e3:.1f} kFLOP per row at 1 FLOP each, of which "
        f"{exp_ops / row.flops * 100:.0f}% are exp",
        f" Ascend A5-class VALU ({ctx.ascend.name}): mul/add/min-max/cmp/logic {alu:.0f}, "
        f"div/mod {div:.0f}, special functions {sfu:.0f} ops/cycle",
        f" a transcendental costs {alu / sfu:.2f}x a multiply per op.",
        f" unweighted: {unweighted / 1e3:8.1f} k cycles ({row.flops:.0f} ops / {alu:.0f})",
        f" per pipe, issued one after another: {per_pipe_serial / 1e3:.1f} k cycles "
        f"({per_pipe_serial:.1f} cycles, {per_pipe_serial / unweighted:.3f}x)",
        f" per pipe, overlapped (the speed of light): the exp pipe alone bounds the row at "
        f"{per_pipe_max / 1e3:.1f} k cycles ({cycles['ascend_vector.sfu']:.0f}) against "
        f"{cycles['ascend_vector.alu'] / 1e3:.1f} k ({cycles['ascend_vector.alu']:.1f}) for "
        "everything else (TileOPs roofline.md:34: the metric does not certify an SFU-bound "
        "kernel as at its limit)",
        f" on {ctx.machine.name} (CUDA guide: 128 FP32 vs 16 SFU results/clk/SM, uncalibrated): "
        f"sfu.fp32 {nv_price.unit_time_s['sfu.fp32'] * 1e9:.2f} ns vs cuda_core.fp32 "
        f"{nv_price.unit_time_s['cuda_core.fp32'] * 1e9:.2f} ns per row: the "
        f"{nv_price.binding_unit} pipe binds",
    ))


def softmax_row_ledger(alu: str, sfu: str, scores: int = SOFTMAX_SCORES) -> Ledger:
    """One softmax row as M5 counts it; tensors are irrelevant to the per-pipe question."""

    return Ledger(
        name="softmax_row", roof=alu,
        tensors=(Tensor("scores", (scores,), "fp32", Role.INPUT),
                 Tensor("probs", (scores,), "fp32", Role.OUTPUT)),
        work=(Work(sfu, "transcendental", scores, "exp"),
              Work(alu, "arithmetic", 4 * scores, "scale, max, subtract, sum")))


def m6(ctx: Context) -> Demo:
    ledger = ctx.ledger
    bw = ctx.machine.dram.effective_bytes_per_s() or 0.0
    per_row = qk_norm_rope_quant(lookups="per_row")
    return Demo("M6", "counting only the payload", (
        f" payload only      : {ledger.payload_bytes / 1e6:8.2f} MB",
        f" payload + lookups : {ledger.bytes / 1e6:8.2f} MB (lookups are "
        f"{ledger.lookup_bytes / ledger.bytes * 100:.1f}% of the ideal traffic: "
        + ", ".join(t.name for t in ledger.tensors if t.role is Role.LOOKUP) + ")",
        f" SOL time          : {ledger.payload_bytes / bw * 1e6:8.3f} us -> "
        f"{ledger.bytes / bw * 1e6:8.3f} us",
        " that is the ideal count, lookups charged once per call (the case study's chapter, "
        "code/06). A design that re-reads both norm weights and",
        f" its token's cos/sin rows for every row moves {per_row.bytes:,} B: "
        f"{per_row.bytes / ledger.bytes:.2f}x the ideal bytes, "
        f"{per_row.lookup_bytes / per_row.bytes * 100:.1f}% of it lookups.",
    ))


def m7(ctx: Context) -> Demo:
    bw = ctx.machine.dram.effective_bytes_per_s() or 0.0
    decode = qk_norm_rope_quant(tokens=1)
    # a kernel's own duration (a profiler's), so the kernel floor applies
    verdict = _verdicts(ctx.machine, [decode.bytes], [decode.flops],
                        [HYPOTHETICAL_DECODE_TIME_S], timing="kernel")[0]
    floor = ctx.machine.latency_floors.floor("kernel")
    return Demo("M7", "reading a number off a row where the model has no traction", (
        f" whole prefill chunk, {ctx.ledger.tensor('q').shape[0]} tokens"
        f"  {ctx.ledger.bytes:>10} B -> SOL {ctx.ledger.bytes / bw * 1e6:9.3f} us",
        f" one decode step, 1 token           {decode.bytes:>10} B -> SOL "
        f"{decode.bytes / bw * 1e6:9.3f} us",
        " the original demonstration's decode step counted only the payload: "
        f"{SEED_M7_DECODE_BYTES} B -> SOL "
        f"{SEED_M7_DECODE_BYTES / bw * 1e6:.3f} us (misuse M6 inside M7);",
        f" with the lookups it is {decode.bytes} B. Both sit far below the latency floor.",
        f" verdict for a hypothetical {HYPOTHETICAL_DECODE_TIME_S * 1e6:.1f} us decode kernel: "
        f"{verdict} (kernel floor {floor.per_call_s * 1e6:g} us, {floor.source})",
        " below the floor, count launches and grid fill, not efficiency (TileOPs "
        "roofline.md:40-41: the model has no traction).",
    ))


def m8(ctx: Context) -> Demo:

    ledger = ctx.ledger
    t = HYPOTHETICAL_PREFILL_TIME_S
    big = qk_norm_rope_quant(tokens=HYPOTHETICAL_BIG_TOKENS)
    big_t = HYPOTHETICAL_BIG_TIME_S
    honest, payload_only, big_verdict = _verdicts(
        ctx.machine, [ledger.bytes, ledger.payload_bytes, big.bytes],
        [ledger.flops, ledger.flops, big.flops], [t, t, big_t],
        [ledger.read_bytes, ledger.read_bytes, big.read_bytes],
        [ledger.write_bytes, ledger.write_bytes, big.write_bytes])
    theory = ctx.machine.dram.theoretical_bytes_per_s or 0.0
    scales = sum(t_.nbytes for t_ in ledger.tensors if t_.name.endswith("_scale"))
    bw = ctx.machine.dram.effective_bytes_per_s() or 0.0
    cache = ctx.machine.caches[-1]
    capacity = cache.capacity_bytes or 0.0
    big_dram = float(dram_bytes_at_least(np.array([float(big.footprint_bytes)]),
                                         np.array([float(big.read_bytes)]),
                                         np.array([float(big.write_bytes)]), capacity)[0])
    return Demo("M8", "reading a >100% efficiency as a great kernel", (
        f" bands (TileOPs roofline.md:156-163): at ceiling >= {AT_CEILING_EFFICIENCY:.0%}; "
        f"anomaly > {ANOMALY_EFFICIENCY:.0%} of the envelope ceiling (a formula or calibration "
        "error, never 'at ceiling')",
        f" physics: bytes/time <= {theory / 1e9:.0f} GB/s theoretical for the bytes HBM "
        f"moves; the {capacity / 1e6:.2f} MB {cache.name} can hold what a call reads before it "
        "and what it writes after, so only the rest must come from HBM; flops/time <= each "
        "declared unit's theoretical peak",
        f" a hypothetical {t * 1e6:.1f} us run of the fused kernel:",
        f"   honest ledger ({ledger.bytes / 1e6:.2f} MB): {ledger.bytes / t / 1e9:.0f} GB/s, "
        f"{ledger.bytes / bw / t:.1%} of SOL -> {honest}: its {ledger.read_bytes / 1e6:.2f} MB "
        f"of reads and {ledger.write_bytes / 1e6:.2f} MB of writes each fit in the "
        f"{cache.name}, so only a warm {cache.name} makes it possible (the original "
        f"demonstration called it impossible); time it with the {cache.name} flushed to tell",
        f"   payload-only ledger ({ledger.payload_bytes / 1e6:.2f} MB): "
        f"{ledger.payload_bytes / bw / t:.1%} of SOL -> {payload_only}: the forgotten lookups "
        "make a broken timing look like a great kernel",
        f" at {HYPOTHETICAL_BIG_TOKENS:,} tokens ({big.bytes / 1e6:.2f} MB) no cache saves a "
        f"hypothetical {big_t * 1e6:.1f} us run ({big.bytes / big_t / 1e9:.0f} GB/s): HBM "
        f"still moves at least {big_dram / 1e6:.2f} MB, {big_dram / big_t / 1e9:.0f} GB/s -> "
        f"{big_verdict}",
        f" a breach of every level is an accounting bug: an under-counted byte total (the "
        f"scale tensors alone are {scales / 1e6:.3f} MB here) or an intermediate that does "
        "reach DRAM.",
    ))


def _verdicts(machine: Machine, bytes_: list[float], flops: list[float],
              time_s: list[float], read_bytes: list[float] | None = None,
              write_bytes: list[float] | None = None, timing: str = "events") -> list[str]:
    n = len(bytes_)
    roof = np.full(n, "cuda_core.fp32", dtype=object)
    b, f, t = np.array(bytes_, float), np.array(flops, float), np.array(time_s, float)
    priced = price_columns(machine, f, b, roof)
    judged = judge(machine, priced, t, np.full(n, timing, dtype=object), b,
                   read_bytes=None if read_bytes is None else np.array(read_bytes, float),
                   write_bytes=None if write_bytes is None else np.array(write_bytes, float))
    return [VERDICTS[int(v)] for v in judged.verdict]


DEMOS: tuple[Callable[[Context], Demo], ...] = (m1, m2, m3, m4, m5, m6, m7, m8)


def render(only: int | None = None) -> str:
    ctx = context()
    lines = header(ctx)
    chosen = DEMOS if not only else (DEMOS[only - 1],)
    for make in chosen:
        demo = make(ctx)
        lines += ["", "=" * 84, f"{demo.code} {demo.title}", "=" * 84, *demo.lines]
    return "\n".join(lines) + "\n"
