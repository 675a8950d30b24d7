"""One step as a serving stack runs it (capture, price, memory fit), and the serving figures of a
request shape: TTFT, TPOT, throughput per batch, where decode turns compute-bound, and the
launch overhead of each step.

Every figure is a speed-of-light bound: kernels priced at the calibrated roofs, one after
another with nothing overlapped and no scheduler, sampler or host time. A measured serving
run is slower; how much slower is what `roofwise analyze` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from roofwise.base.errors import InputError
from roofwise.models import sweep
from roofwise.models.config import ModelConfig
from roofwise.models.memory import check_positions, memory_fit
from roofwise.models.project import Projection, project
from roofwise.models.quant import (
    WEIGHT_GEMMS,
    WeightScheme,
    parse_weights,
    quantize_capture,
    quantized_gemm,
    scheme_from_config,
)
from roofwise.models.stored import (
    NO_STORE,
    CaptureStore,
    config_key,
    load_capture,
    save_capture,
    step_key,
)
from roofwise.pricing.core import price_ledger
from roofwise.profiles.machine import Machine


@dataclass(frozen=True)
class StepOptions:
    """How a step is built and priced, beside its shape."""

    dtype: str = "bf16"
    kv_dtype: str | None = None
    fused: bool = True
    tp: int = 1
    regime: str | None = None
    allow_long_context: bool = False
    mla: str = "absorbed"  # multi-head latent attention at decode: absorbed or expanded
    weights: str | None = None  # --weights fp8|int8|int4[:group]; None: the config's scheme
    store: CaptureStore = NO_STORE  # where captures are kept; no option of the step itself


def project_step(config: ModelConfig, machine: Machine, phase: str, batch: int, seq: int,
                 context: int, options: StepOptions) -> Projection:
    """Capture one step of the (sharded) config, price it, and fit it in the card's memory."""
    capture = capture_for(config, phase, batch, seq, context, options)
    return step_of(capture, config, machine, phase, batch, seq, context, options,
                   options.regime)


def weight_scheme(config: ModelConfig, options: StepOptions) -> WeightScheme | None:
    """--weights when given, else the config's quantization_config; None: unquantized."""
    return (parse_weights(options.weights) if options.weights is not None
            else scheme_from_config(config.raw, config.path))


def capture_for(config: ModelConfig, phase: str, batch: int, seq: int, context: int,
                options: StepOptions) -> Any:
    """The step's capture, its weights read as their scheme stores them (one capture serves
    every regime of a sweep)."""
    from roofwise.models.capture import Step  # deferred: torch

    return captures_for(config, [Step(phase, batch, seq, context)], options)[0]


def captures_for(config: ModelConfig, steps: Sequence[Any], options: StepOptions) -> list[Any]:
    """`capture_for` of each step (models.capture.Step), the model built once for them all."""
    from roofwise.models.capture import capture_steps, check_step  # deferred: torch

    for step in steps:  # the options' own range first, then the model's limit
        check_step(step.batch, step.seq, step.context)
        check_positions(config, step.context + step.seq, options.allow_long_context)
    scheme = weight_scheme(config, options)
    store = options.store
    of_config = config_key(config.raw, config.tp)
    keys = [step_key(of_config, step, options.dtype, options.kv_dtype, options.fused,
                     options.mla) for step in steps]
    found = [load_capture(store, key) for key in keys]
    missing = [i for i, capture in enumerate(found) if capture is None]
    if missing:
        made = capture_steps(loaded(config), [steps[i] for i in missing], options.dtype,
                             options.kv_dtype, options.fused, options.mla)
        for i, capture in zip(missing, made, strict=True):
            found[i] = capture
            save_capture(store, keys[i], capture)
    captures = [capture for capture in found if capture is not None]
    return captures if scheme is None else [quantize_capture(c, scheme) for c in captures]


def loaded(config: ModelConfig) -> ModelConfig:
    """`config` with its transformers object, loaded again if it came back from the store
    without one (a step it has not captured yet)."""
    from roofwise.models.config import load_config, shard  # deferred: transformers

    return config if config.hf is not None else shard(load_config(config.path), config.tp)


def step_of(capture: Any, config: ModelConfig, machine: Machine, phase: str, batch: int,
            seq: int, context: int, options: StepOptions, regime: str | None) -> Projection:
    """A captured step priced under `regime`, with its notes and memory fit."""
    scheme = weight_scheme(config, options)
    projection = project(capture, machine, phase, batch, seq, context, options.tp, regime)
    if projection.step_time_s <= 0:  # every TTFT, TPOT and throughput would divide by it
        raise InputError(f"--machine {machine.name}", "prices no op of the step in seconds "
                                                      "(its rates are gaps: it prices in "
                                                      "cycles); expected a profile with rates "
                                                      "per second")
    if capture.mla is not None:
        projection = replace(projection, notes=(*projection.notes, mla_note(capture.mla,
                                                                             phase)))
    unused = mla_unused(capture, options)
    if unused is not None:
        projection = replace(projection, notes=(*projection.notes, unused))
    if scheme is not None:
        projection = replace(projection, weights=scheme.name, notes=(
            *projection.notes, f"weights {scheme.name} (from {scheme.source}): "
            + (f"GEMMs on the {scheme.activations} tensor cores, activations quantized "
               f"{scheme.act_groups_label.replace('1x', 'per 1x')}"
               if scheme.activations is not None else
               f"GEMMs on the {capture.dtype} tensor cores, each weight dequantised once")
            + "; embeddings, norms, routers and the LM head unquantized"
            + (f"; {len(scheme.ignore)} module pattern(s) the config leaves unquantized"
               if scheme.ignore else "")))
    return with_memory(projection, config)


def mla_unused(capture: Any, options: StepOptions) -> str | None:
    """A note where `--mla expanded` was asked of a model without multi-head latent
    attention: it changes nothing there."""
    if options.mla == "expanded" and capture.mla is None:
        return ("--mla expanded changes nothing: the model has no multi-head latent attention "
                "(DeepSeek-V2/V3's), whose form it picks")
    return None


def mla_note(form: str, phase: str) -> str:
    if form == "absorbed":
        return ("MLA absorbed (as FlashMLA, vLLM, SGLang decode): W_UK into the query, W_UV "
                "into the output, attention on the latent cache read once; --mla expanded "
                "for transformers' form")
    why = ("prefill runs the expanded form, as serving stacks do for prompts"
           if phase == "prefill" else "as transformers runs it")
    return (f"MLA expanded ({why}): the latent cache re-expanded through kv_b_proj each step, "
            "attention over per-head keys and values")


def with_memory(projection: Projection, config: ModelConfig,
                weight_bytes: float | None = None) -> Projection:
    """The projection with its shard's memory fit (weights as captured unless given)."""
    cap = projection.capture
    level = projection.machine.dram
    fit = memory_fit(config, cap.kv_layers,
                     cap.weight_bytes if weight_bytes is None else weight_bytes,
                     level.capacity_bytes, level.capacity_source, projection.batch,
                     projection.seq, projection.context, cap.dtype, cap.kv_dtype)
    notes = [*projection.notes]
    if fit.capacity_bytes is None:
        notes.append(f"memory: profile {projection.machine.name} states no capacity; "
                     "fits unknown")
    else:
        notes.append("memory per device: weights + KV cache + activation peak estimate "
                     "against the datasheet capacity (runtime and allocator reserve not "
                     "subtracted)")
    return replace(projection, memory=fit, notes=tuple(notes))


def memory_lines(projection: Projection, nbytes: Any) -> list[str]:
    """The memory fit in words (`nbytes` formats a byte count)."""
    fit = projection.memory
    if fit is None:
        return []
    per = " per device" if projection.tp > 1 else ""
    head = (f"memory{per}: weights {nbytes(fit.weight_bytes)} + KV cache "
            f"{nbytes(fit.kv_cache_bytes)} + activation peak ~{nbytes(fit.activation_peak_bytes)}"
            f" = {nbytes(fit.resident_bytes)}")
    if fit.capacity_bytes is None:
        return [head + "; capacity unknown (the profile states none)"]
    verdict = "fits" if fit.fits else "DOES NOT FIT"
    head += (f" of {nbytes(fit.capacity_bytes)}: {verdict}, headroom "
             f"{nbytes(fit.headroom_bytes)}")
    batch = ("no batch fits at this context" if not fit.max_batch
             else f"largest batch at this context {fit.max_batch:,}")
    return [head, f"{batch}; {_context_words(fit.max_context, fit.max_context_limited_by)}"]


def _context_words(most: int | None, limited_by: str) -> str:
    if limited_by == "memory":
        return f"longest context at this batch {most:,} (memory)"
    if limited_by == "max_position_embeddings":
        return f"longest context at this batch {most:,} (the model's position limit)"
    if limited_by == "no bound":
        return "no context bound at this batch (every cache layer windowed)"
    return "no context fits at this batch"


@dataclass(frozen=True)
class Request:
    """A request shape: `input` prompt tokens, `output` generated tokens."""

    input: int
    output: int

    @property
    def mean_decode_context(self) -> int:
        """The cached tokens of the mean decode step. The first output token comes from the
        prefill; decode step k (1 .. output-1) runs over input + k - 1 cached tokens, so the
        mean is input + (output - 2) / 2 (rounded down). A decode step's time is affine in its
        context, so the step at the mean context is the mean step."""
        return self.input + max(self.output - 2, 0) // 2


def parse_request(text: str) -> Request:
    """`input=2048,output=256` -> Request(2048, 256)."""
    found: dict[str, int] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("input", "output") or key in found:
            raise InputError(f"--serve {text}", "expected input=N,output=N (each once)")
        try:
            found[key] = int(value)
        except ValueError:
            raise InputError(f"--serve {key}", f"expected an integer, got {value!r}") from None
        if found[key] < 1:
            raise InputError(f"--serve {key}", f"expected a positive integer, got {value!r}")
    if set(found) != {"input", "output"}:
        raise InputError(f"--serve {text}", "expected both input=N and output=N")
    return Request(found["input"], found["output"])


@dataclass(frozen=True)
class LaunchFloor:
    """What launching a step's kernels costs at least, eagerly and as one CUDA graph."""

    kernels: int
    eager_s: float
    graph_s: float
    eager_assumed: bool
    graph_assumed: bool


def launch_floor(projection: Projection) -> LaunchFloor:
    """The step's kernels (every priced row, all its calls; collectives included) under the
    profile's `events` floor (eager: host dispatch and one launch per kernel) and its `graph`
    floor (one graph launch, the gaps between its kernels)."""
    kernels = sum(r.count for r in projection.rows if r.ledger is not None)
    floors = projection.machine.latency_floors
    return LaunchFloor(kernels, floors.floor_s("events", kernels),
                       floors.floor_s("graph", kernels), floors.floor("events").assumed,
                       floors.floor("graph").assumed)


@dataclass(frozen=True)
class ServePoint:
    """The serving figures of one batch of identical requests."""

    batch: int
    request: Request
    prefill: Projection  # the prompt: batch x input tokens, nothing cached
    decode: Projection  # one token per sequence over the mean decode context
    memory: Any  # MemoryFit at the last token: input + output positions cached
    prefill_launch: LaunchFloor
    decode_launch: LaunchFloor

    @property
    def ttft_s(self) -> float:
        return self.prefill.step_time_s

    @property
    def decodes(self) -> bool:
        """Whether a decode step runs: output 1 is the prefill's token alone."""
        return self.request.output > 1

    @property
    def tpot_s(self) -> float | None:
        """One decode step's time; None where no decode step runs (output 1)."""
        return self.decode.step_time_s if self.decodes else None

    @property
    def request_time_s(self) -> float:
        """Prefill, then output - 1 decode steps (the batch runs in lock step)."""
        return self.ttft_s + (self.request.output - 1) * self.decode.step_time_s

    @property
    def throughput_tokens_per_s(self) -> float:
        """Output tokens of the whole batch over its request time (all devices together)."""
        return self.batch * self.request.output / self.request_time_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.throughput_tokens_per_s / self.prefill.tp

    @property
    def decode_tokens_per_s(self) -> float | None:
        return None if self.tpot_s is None else self.batch / self.tpot_s

    def as_json(self) -> dict[str, Any]:
        def launch(floor: LaunchFloor) -> dict[str, Any]:
            return {"kernels": floor.kernels, "eager_floor_s": floor.eager_s,
                    "graph_floor_s": floor.graph_s, "eager_floor_assumed": floor.eager_assumed,
                    "graph_floor_assumed": floor.graph_assumed}

        tpot = self.tpot_s  # the decode step's figures are null where none runs (output 1)
        return {"op": "serve", "bound": "speed of light", "batch": self.batch,
                "input": self.request.input, "output": self.request.output,
                "tp": self.prefill.tp, "machine": self.prefill.machine.name,
                "ttft_s": self.ttft_s, "tpot_s": tpot,
                "decode_context": self.decode.context if self.decodes else None,
                "request_time_s": self.request_time_s,
                "throughput_tokens_per_s": self.throughput_tokens_per_s,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "decode_tokens_per_s": self.decode_tokens_per_s,
                "prefill_bound": step_bound(self.prefill),
                "decode_bound": step_bound(self.decode) if self.decodes else None,
                "prefill_launch": launch(self.prefill_launch),
                "decode_launch": launch(self.decode_launch) if self.decodes else None,
                "ttft_with_eager_launches_s": max(self.ttft_s, self.prefill_launch.eager_s),
                "tpot_with_eager_launches_s": None if tpot is None else max(
                    tpot, self.decode_launch.eager_s),
                "tpot_with_cuda_graph_s": None if tpot is None else max(
                    tpot, self.decode_launch.graph_s),
                **{f"memory_{k}" if not k.startswith(("fits", "max_")) else k: v
                   for k, v in self.memory.as_json().items()}}


def gemm_crossover(machine: Machine, shapes: str, scheme: WeightScheme | None,
                   regime: str) -> int | None:
    """The fewest tokens at which a weight GEMM row's kernel (as its scheme runs it) is
    compute-bound; None: not up to sweep.MAX_TOKENS; 0: not a weight GEMM's shapes."""
    shape = sweep.gemm_shape(shapes)
    if shape is None:
        return 0
    n, k, dtype = shape
    if scheme is None:
        return sweep.crossover_tokens(machine, n, k, dtype, regime)

    def compute_bound(m: int) -> bool:
        ledger = quantized_gemm(f"[{m}, {k}] {dtype}, [{k}, {n}] {dtype}", scheme)
        assert ledger is not None
        return price_ledger(ledger, machine, regime).bound == "compute"

    if not compute_bound(sweep.MAX_TOKENS):
        return None
    low, high = 1, sweep.MAX_TOKENS
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if compute_bound(middle) else (middle + 1, high)
    return low


def step_bound(projection: Projection) -> str:
    """What most of the step's time is bound by: memory, compute or interconnect."""
    shares: dict[str, float] = {}
    for row in projection.rows:
        if row.sol_time_s is not None:
            shares[row.bound] = shares.get(row.bound, 0.0) + row.sol_time_s
    return max(shares, key=lambda k: shares[k]) if shares else "-"


@dataclass(frozen=True)
class Serving:
    """Serving figures over batches, and where the decode step's GEMMs turn compute-bound."""

    points: tuple[ServePoint, ...]
    request: Request
    # the fewest sequences per decode step at which every weight GEMM (aten::mm) of the step
    # is compute-bound (first: the first one is); None: not up to sweep.MAX_TOKENS
    compute_bound_batch: int | None
    first_compute_bound_batch: int | None
    regime: str
    notes: tuple[str, ...] = ()  # about the options, beside SERVE_NOTES

    def summary_json(self) -> dict[str, Any]:
        return {"op": "serve total", "bound": "speed of light", "input": self.request.input,
                "output": self.request.output, "batches": [p.batch for p in self.points],
                "decode_compute_bound_batch": self.compute_bound_batch,
                "decode_first_gemm_compute_bound_batch": self.first_compute_bound_batch,
                "crossover_regime": self.regime,
                "notes": [*SERVE_NOTES, *self.notes]}


SERVE_NOTES = (
    "every figure is a speed-of-light bound: kernels at the calibrated roofs one after "
    "another, no scheduler, sampler or host time; a served request is slower",
    "TTFT: the prefill of the whole prompt for the batch; TPOT: one decode step at the mean "
    "context of the generation; throughput: batch x output tokens over TTFT + (output-1) x TPOT",
    "launch floors: the step's kernels as priced here under the profile's events (eager) and "
    "graph (one CUDA graph) floors; a stack that fuses more launches fewer kernels",
)


def serve(config: ModelConfig, machine: Machine, request: Request, batches: list[int],
          options: StepOptions) -> Serving:
    """TTFT, TPOT and throughput at each batch (two captures each), and the decode crossover."""
    check_positions(config, request.input + request.output, options.allow_long_context,
                    "--serve input + output")
    from roofwise.models.capture import Step  # deferred: torch

    steps = [step for batch in batches for step in (
        Step("prefill", batch, request.input, 0),
        Step("decode", batch, 1, request.mean_decode_context))]
    captures = captures_for(config, steps, options)
    points = []
    for i, batch in enumerate(batches):
        prefill = step_of(captures[2 * i], config, machine, "prefill", batch, request.input, 0,
                          options, options.regime)
        decode = step_of(captures[2 * i + 1], config, machine, "decode", batch, 1,
                         request.mean_decode_context, options, options.regime)
        cap = decode.capture
        level = machine.dram
        fit = memory_fit(config, cap.kv_layers, decode.memory.weight_bytes,
                         level.capacity_bytes, level.capacity_source, batch, 1,
                         request.input + request.output - 1, cap.dtype, cap.kv_dtype)
        points.append(ServePoint(batch, request, prefill, decode, fit, launch_floor(prefill),
                                 launch_floor(decode)))
    regime = options.regime or "sustained"
    scheme = weight_scheme(config, options)
    crossovers = [gemm_crossover(machine, row.shapes, scheme if row.ledger is not None
                                 and row.ledger.name.startswith("gemm_") else None, regime)
                  for row in points[0].decode.rows if row.op in WEIGHT_GEMMS]
    crossovers = [c for c in crossovers if c != 0]
    every = (None if not crossovers or any(c is None for c in crossovers)
             else max(c for c in crossovers if c is not None))
    first = min((c for c in crossovers if c is not None), default=None)
    unused = mla_unused(points[0].decode.capture, options)
    return Serving(tuple(points), request, every, first, regime,
                   () if unused is None else (unused,))
