"""Collectives in a trace: which kernels and ops are communication, and what a call must move.

One registry (`KERNEL_PATTERNS`, `OP_PATTERNS`) says what is communication: NCCL/RCCL kernels,
c10d and functional-collective ops, PyTorch's symmetric-memory ops and kernels, and the custom
all-reduces of serving stacks (vLLM, SGLang, TensorRT-LLM, FlashInfer). A kernel is
communication when its name matches, or when the op that launched it does (the copy a
collective launches is part of its cost).

The message a call moves comes from the kernel's own arguments where the profiler recorded
them (`Collective name`, `In msg nelems`, `Out msg nelems`, `Group size`, `dtype`: PyTorch 2.1
on), else from the op's recorded input shapes. It is priced on the profile's interconnect as a
lower bound that holds for every algorithm (ring, tree, NVLink SHARP): the bytes each GPU must
at least receive or send one way, `wire_bytes`, over the link's one-way rate. Ranks on other
nodes talk over slower links, and a collective's kernel also waits for the slowest peer, so the
bound is often far from the time: a low efficiency says "waiting or slow link", never
"impossible"; only a time below the bound on a group known to hold 2 ranks or more is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roofwise.base.dtypes import BYTES_PER_ELEMENT

if TYPE_CHECKING:  # the reader imports this module: it stays light
    from roofwise.profiles.machine import Machine

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, SEND_RECV, OTHER = (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv",
    "collective")


@dataclass(frozen=True)
class Pattern:
    """One family of communication names; `example` is a real name it must match (tested)."""

    regex: re.Pattern[str]
    family: str
    example: str


def _p(regex: str, family: str, example: str) -> Pattern:
    return Pattern(re.compile(regex, re.IGNORECASE), family, example)


# Kernel names (demangled, as Kineto writes them).
KERNEL_PATTERNS = (
    _p(r"(?<![a-z])(nccl|rccl)", "NCCL / RCCL",
       "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"),
    _p(r"(?<![a-z])(nccl|rccl)", "NCCL 2.19+ device kernels",
       "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"),
    _p(r"multimem_|symmetric_memory::", "PyTorch symmetric memory (NVLink SHARP multimem)",
       "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 8, 16>"
       "(c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, "
       "unsigned long)"),
    _p(r"(one|two)_shot_(all_)?reduce", "PyTorch symmetric memory (one / two shot)",
       "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 16, 8>(...)"),
    _p(r"cross_device_reduce_", "vLLM / SGLang custom all-reduce",
       "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
       "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)"),
    _p(r"all_?reduce|all_?gather|reduce_?scatter", "TensorRT-LLM / FlashInfer / quick all-reduce",
       "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>"
       "(tensorrt_llm::kernels::AllReduceParams)"),
    _p(r"mscclpp|deep_ep::", "MSCCL++ / DeepEP",
       "void deep_ep::intranode::dispatch<8, 768, 8192>(...)"),
)
# Op names (`cpu_op` events). aten ops are never collectives.
OP_PATTERNS = (
    _p(r"^c10d::", "c10d (torch.distributed)", "c10d::allreduce_"),
    _p(r"^_?c10d_functional::", "functional collectives (torch.compile)",
       "_c10d_functional::all_reduce"),
    _p(r"^symm_mem::", "PyTorch symmetric memory", "symm_mem::multimem_all_reduce_"),
    _p(r"^nccl:|^record_param_comms$", "torch.distributed's comms record",
       "record_param_comms"),
    _p(r"^(?!aten::)[\w.]+::\w*(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all)",
       "serving stacks' collectives (vLLM, SGLang, TensorRT-LLM)",
       "_C_custom_ar::all_reduce"),
)


def is_collective_kernel(name: str) -> bool:
    return any(p.regex.search(name) for p in KERNEL_PATTERNS)


def is_collective_op(name: str) -> bool:
    return any(p.regex.search(name) for p in OP_PATTERNS)


def kind_of(name: str) -> str:
    """all_reduce, all_gather, ... from an op, kernel or `Collective name`; OTHER if unsaid."""
    lowered = name.lower().replace("_", "").replace(" ", "")
    for words, kind in (("allreduce", ALL_REDUCE), ("crossdevicereduce", ALL_REDUCE),
                        ("reducescatter", REDUCE_SCATTER), ("allgather", ALL_GATHER),
                        ("alltoall", ALL_TO_ALL), ("broadcast", BROADCAST),
                        ("sendrecv", SEND_RECV), ("send", SEND_RECV), ("recv", SEND_RECV)):
        if words in lowered:
            return kind
    return OTHER


# `dtype` in a kernel's collective arguments: c10::ScalarType names.
_SCALAR_TYPES = {"Float": "fp32", "Double": "fp64", "Half": "fp16", "BFloat16": "bf16",
                 "Long": "int64", "Int": "int32", "Short": "int16", "Char": "int8",
                 "Byte": "uint8", "Bool": "bool", "Float8_e4m3fn": "fp8_e4m3",
                 "Float8_e5m2": "fp8_e5m2"}


@dataclass(frozen=True)
class Message:
    """What one collective call moves, as recorded: bytes in and out of the call on this rank."""

    kind: str
    in_bytes: float | None
    out_bytes: float | None
    group_size: int | None  # None: not recorded
    source: str  # "kernel args" or "op shapes"
    label: str = ""  # as recorded in the kernel's args: `allreduce 2049000 x Float, group of 2`

    def wire_bytes(self) -> tuple[float | None, str]:
        """The fewest bytes one GPU must move one way, for any algorithm; or None and why."""
        n, m_in, m_out = self.group_size, self.in_bytes, self.out_bytes
        if n is not None and n < 2:
            return None, "a group of one rank: nothing crosses a link"
        if self.kind in (ALL_REDUCE, BROADCAST, SEND_RECV) and m_in is not None:
            return m_in, ""  # every element of the result needs one value from outside
        if self.kind == ALL_GATHER and m_in is not None:
            if m_out is not None and m_out > m_in:
                return m_out - m_in, ""  # the other ranks' shards
            if n is not None:
                return m_in * (n - 1), ""
        if self.kind == REDUCE_SCATTER and m_in is not None:
            if m_out is not None and m_in > m_out:
                return m_in - m_out, ""  # the parts of the input that belong to other ranks
            if n is not None:
                return m_in * (n - 1) / n, ""
        if self.kind == ALL_TO_ALL and m_in is not None and n is not None:
            return m_in * (n - 1) / n, ""
        if self.kind == OTHER:
            return None, "which collective it is was not recorded"
        return None, f"the {self.kind.replace('_', '-')}'s message size was not recorded"


def kernel_message(args: Any) -> tuple[Any, ...] | None:
    """From a kernel's args, the collective fields PyTorch 2.1+ records, as a hashable tuple
    (kind, in elements, out elements, group size, dtype); None when absent or mistyped."""
    if not isinstance(args, dict):
        return None
    name = args.get("Collective name")
    if not isinstance(name, str):
        return None
    fields = [args.get(k) for k in ("In msg nelems", "Out msg nelems", "Group size")]
    numbers = tuple(v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
                    for v in fields)
    dtype = args.get("dtype")
    return (name, *numbers, dtype if isinstance(dtype, str) else None)


def message_of(op_name: str, dims: Sequence[Any], types: Sequence[str],
               recorded: tuple[Any, ...] | None, kernel_name: str = "") -> Message:
    """The message of one call: the kernel's recorded fields first, else the op's shapes
    (which collective: the op's name, else its kernel's)."""
    if recorded is not None:
        name, n_in, n_out, group, dtype = recorded
        size = BYTES_PER_ELEMENT.get(_SCALAR_TYPES.get(dtype or "", ""))
        kind = kind_of(name)
        label = f"{name} {'?' if n_in is None else n_in} x {dtype or '?'}" + (
            f", group of {group}" if group is not None else "")
        return Message(kind, None if n_in is None or size is None else n_in * size,
                       None if n_out is None or size is None else n_out * size, group,
                       "kernel args", label)
    # 0-d entries are scalars (a handle, a flag) or empty lists, never the message
    tensors = [_bytes(d, t) for d, t in zip(dims, types, strict=False) if d]
    sizes = [b for b in tensors if b is not None and b > 0]
    kind = kind_of(op_name)
    if kind == OTHER and kind_of(kernel_name) != SEND_RECV:
        kind = kind_of(kernel_name)  # NCCL's SendRecv kernel also runs all-to-alls: not said
    first = sizes[0] if sizes else None
    if kind in (ALL_GATHER, REDUCE_SCATTER) and len(sizes) >= 2:
        small, large = sorted(sizes[:2])
        return Message(kind, small if kind == ALL_GATHER else large,
                       large if kind == ALL_GATHER else small, None, "op shapes")
    return Message(kind, first, first if kind in (ALL_REDUCE, BROADCAST) else None, None,
                   "op shapes")


def _bytes(dims: Any, dtype: str) -> float | None:
    from roofwise.traces.aten import TRACE_DTYPES  # deferred: the reader imports this module

    name = TRACE_DTYPES.get(dtype)
    if name is None or not isinstance(dims, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        return None
    count = 1
    for d in dims:
        count *= d
    return float(count) * BYTES_PER_ELEMENT[name]


# verdicts for a collective call, in the words records use
AT_CEILING, BELOW, LATENCY_BOUND, IMPOSSIBLE, ANOMALY, BLANK = (
    "at_ceiling", "below", "latency_bound", "impossible", "anomaly", "blank")
AT_CEILING_EFFICIENCY = 0.80
FLOOR_EXPLAINS_SHARE = 0.5


@dataclass(frozen=True)
class CollectiveJudged:
    sol_time_s: float | None
    wire_bytes: float | None
    verdict: str
    reason: str


def judge_collective(message: Message | None, time_s: float, kernels: int,
                     machine: Machine | None, unmatched_reason: str = "") -> CollectiveJudged:
    """A call's lower bound on the machine's interconnect, and the verdict of its time."""
    if machine is None:
        return CollectiveJudged(None, None, BLANK, "communication: "
                                + (unmatched_reason or "no profile matched"))
    link = machine.interconnect
    wire, why = message.wire_bytes() if message is not None else (None, "no message recorded")
    if wire is None:
        return CollectiveJudged(None, None, BLANK, f"communication: {why}")
    if link is None:
        return CollectiveJudged(None, wire, BLANK,
                                f"communication: profile {machine.name} has no interconnect "
                                "figure, so collectives are not priced")
    sol = wire / link.one_way_bytes_per_s
    kind = message.kind.replace("_", "-") if message is not None else "collective"
    said = (f"{kind}: at least {wire:,.0f} B one way on {link.name} "
            f"({link.one_way_bytes_per_s / 1e9:.0f} GB/s), any algorithm; its time includes "
            "waiting for the other ranks")
    if time_s <= 0:
        return CollectiveJudged(sol, wire, BLANK, f"{said}; no positive time")
    if time_s < sol:
        if message is not None and message.group_size is not None:
            return CollectiveJudged(sol, wire, IMPOSSIBLE,
                                    f"{said}; the time is below it: an accounting error")
        return CollectiveJudged(sol, wire, ANOMALY,
                                f"{said}; the time is below it, possible only if the group "
                                "holds one rank (its size was not recorded)")
    # the kernel's floor, plus one hop across the link (any collective takes one at least)
    floor = (machine.latency_floors.floor_s("kernel", float(max(kernels, 1)))
             + link.hop_latency_s)
    if sol < floor and floor >= FLOOR_EXPLAINS_SHARE * time_s:
        return CollectiveJudged(sol, wire, LATENCY_BOUND,
                                f"{said}; under the {floor * 1e6:g} us floor (a kernel and one "
                                "hop" + (", assumed" if link.hop_latency_assumed else "") + ")")
    return CollectiveJudged(sol, wire, AT_CEILING if sol / time_s >= AT_CEILING_EFFICIENCY
                            else BELOW, said)
