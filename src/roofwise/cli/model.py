"""`roofwise model CONFIG.json`: a model's prefill or decode step projected on a machine, from
its Hugging Face config alone (no weights, no network, no GPU)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from roofwise.base import fmt
from roofwise.base.errors import InputError
from roofwise.cli.common import console, finite, load_machine_arg, note, print_hanging
from roofwise.cli.machines import print_fitted
from roofwise.models.project import projection_records
from roofwise.models.serve import memory_lines
from roofwise.profiles.machine import REGIMES, Machine
from roofwise.render.layout import Column, fit_table


@click.command("model")
@click.argument("config_path", metavar="CONFIG.json")
@click.option("--machine", "-m", "machine_name", required=True, metavar="NAME|FILE",
              help="Built-in profile name or alias, or a profile YAML.")
@click.option("--phase", type=click.Choice(("prefill", "decode")), default=None,
              help="prefill: --seq new tokens per sequence; decode: one step of --seq "
                   "(default 1) tokens over --context cached ones. Required unless --serve.")
@click.option("--batch", "batches", default="1", show_default=True, metavar="N[,N...]",
              help="Sequences per step; with --serve, a list of batches (1,8,64).")
@click.option("--seq", default=None, type=click.IntRange(min=1),
              help="New tokens per sequence (prefill: required; decode: default 1).")
@click.option("--context", default=0, show_default=True, type=click.IntRange(min=0),
              help="Tokens already in the KV cache of each sequence.")
@click.option("--tp", default=1, show_default=True, type=click.IntRange(min=1),
              help="Tensor-parallel devices: heads, MLP columns and vocabulary split; "
                   "per-layer all-reduces priced on the profile's interconnect.")
@click.option("--dtype", default="bf16", show_default=True,
              type=click.Choice(("bf16", "fp16", "fp32")), help="Weights and activations.")
@click.option("--kv-dtype", "kv_dtype", default=None, metavar="DTYPE",
              help="KV cache dtype (e.g. fp8); default: --dtype.")
@click.option("--weights", "weights", default=None, metavar="fp8|int8|int4[:GROUP]",
              help="Quantized weights, overriding the config's quantization_config: fp8 "
                   "(128x128 block scales, fp8 GEMMs), int8 (per channel) or int4 (group 128 "
                   "or GROUP, zero points), weight-only.")
@click.option("--mla", type=click.Choice(("absorbed", "expanded")), default="absorbed",
              show_default=True,
              help="Multi-head latent attention (DeepSeek) at decode: absorbed, as FlashMLA, "
                   "vLLM and SGLang serve it, or expanded, as transformers runs it.")
@click.option("--regime", default=None, metavar="NAME",
              help="Compute regime (sustained, burst); default: the envelope.")
@click.option("--unfused", is_flag=True,
              help="Attention as transformers' eager matmul-softmax-matmul and norms op by op, "
                   "instead of the fused kernels a serving stack runs.")
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY=v1,v2",
              help="Grid over batch, seq or context (repeatable); prints each point and where "
                   "each GEMM turns compute-bound under sustained and burst rates.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per op row; the last line is {\"op\": \"total\", ...}.")
@click.option("--records-out", "records_out", default=None, metavar="PATH",
              help="Write the projected ops as records with time_s empty (.jsonl or .parquet), "
                   "for `roofwise analyze --projection`.")
@click.option("--serve", "serve_text", default=None, metavar="input=N,output=N",
              help="Serving figures of a request shape at each --batch: TTFT, TPOT, "
                   "throughput, tokens/s per GPU, memory fit, launch floors (speed-of-light "
                   "bounds).")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="Capture every step again instead of reading the captures kept from "
                   "earlier runs ($ROOFWISE_CACHE_DIR, else ~/.cache/roofwise).")
@click.option("--allow-long-context", "allow_long", is_flag=True,
              help="Project past the config's max_position_embeddings (refused otherwise).")
@click.option("--limit", default=40, show_default=True, type=click.IntRange(min=0),
              help="Op rows in the table, most time first (0 for all).")
def model_command(config_path: str, machine_name: str, phase: str | None, batches: str,
                  seq: int | None, context: int, tp: int, dtype: str, kv_dtype: str | None,
                  weights: str | None, mla: str, regime: str | None, unfused: bool,
                  sweeps: tuple[str, ...], as_json: bool, records_out: str | None,
                  serve_text: str | None, no_cache: bool, allow_long: bool,
                  limit: int) -> None:
    """Project one prefill or decode step of a transformers model on a machine: every op
    priced, per layer type and in total, and whether it fits in the card's memory; or, with
    --serve, a request shape's serving figures."""
    sizes = parse_batches(batches)
    if serve_text is None and len(sizes) > 1:
        raise click.UsageError("--batch takes one value without --serve (a grid: --sweep "
                               "batch=...)")
    if serve_text is None and phase is None:
        raise click.UsageError("needs --phase prefill|decode, or --serve input=N,output=N")
    with _no_stdin():
        if serve_text is not None:
            _serve(config_path, machine_name, serve_text, sizes, tp, dtype, kv_dtype, regime,
                   unfused, allow_long, as_json, mla, weights, no_cache)
            return
        assert phase is not None
        _model(config_path, machine_name, phase, sizes[0], seq, context, tp, dtype, kv_dtype,
               regime, unfused, sweeps, as_json, records_out, limit, allow_long, mla, weights,
               no_cache)


def parse_batches(text: str) -> list[int]:
    """`1,8,64` -> [1, 8, 64]; each a positive integer."""
    try:
        sizes = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError("--batch", f"expected N or N,N,... (integers), got {text!r}") from None
    if not sizes or any(s < 1 for s in sizes):
        raise InputError("--batch", f"expected positive integers, got {text!r}")
    return sizes


@contextlib.contextmanager
def _no_stdin() -> Iterator[None]:
    """Standard input reads as empty while a model is built: nothing a library asks there can
    wait for, or take, an answer (a `[y/N]` for a config's custom code is answered no)."""
    saved = sys.stdin
    sys.stdin = io.StringIO("")
    try:
        yield
    finally:
        sys.stdin = saved


def _model(config_path: str, machine_name: str, phase: str, batch: int, seq: int | None,
           context: int, tp: int, dtype: str, kv_dtype: str | None, regime: str | None,
           unfused: bool, sweeps: tuple[str, ...], as_json: bool, records_out: str | None,
           limit: int, allow_long: bool = False, mla: str = "absorbed",
           weights: str | None = None, no_cache: bool = False) -> None:

    if regime is not None and regime not in REGIMES:  # before the profile says "no rates"
        raise InputError("--regime", f"expected one of {', '.join(REGIMES)}, got {regime!r}")
    machine = load_machine_arg(machine_name)
    assert machine is not None
    if seq is None:
        if phase == "prefill":
            raise click.UsageError("--phase prefill needs --seq (tokens per sequence)")
        seq = 1
    if records_out is not None:
        from roofwise.records.write import format_of  # deferred: polars, for this option only

        if format_of(records_out) not in ("jsonl", "parquet"):
            raise InputError(records_out, "expected a records file ending in .jsonl or .parquet")
    if tp > 1 and machine.interconnect is None:
        note(f"roofwise: profile {machine.name} has no interconnect: the all-reduces of "
             f"--tp {tp} stay unpriced")
    store, config = _load(config_path, tp, no_cache)
    options = dict(phase=phase, dtype=dtype, kv_dtype=kv_dtype, fused=not unfused, tp=tp,
                   allow_long_context=allow_long, mla=mla, weights=weights, store=store)
    if sweeps:
        _sweep(config, machine, dict(batch=batch, seq=seq, context=context), sweeps, options,
               as_json)
        return
    projection = _project(config, machine, batch, seq, context, regime, options)
    if records_out is not None:
        from roofwise.records.write import write_records

        count = write_records(records_out, projection_records(projection))
        note(f"roofwise: wrote {count} projected op(s) to {records_out}")
    if as_json:
        for row in projection.rows:
            _echo(row.as_json(projection.floor_s))
        _echo(projection.total_json())
        return
    render(projection, console(), None if limit == 0 else limit)


def _project(config: Any, machine: Machine, batch: int, seq: int, context: int,
             regime: str | None, options: dict[str, Any]) -> Any:
    from roofwise.models.serve import StepOptions, project_step  # deferred: torch

    return project_step(config, machine, options["phase"], batch, seq, context,
                        StepOptions(options["dtype"], options["kv_dtype"], options["fused"],
                                    options["tp"], regime, options["allow_long_context"],
                                    options["mla"], options["weights"], options["store"]))


def _echo(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(finite(data)) + "\n")


# designed for 80 columns: layer, op, SOL and what binds always; FLOP, bytes, count and share
# drop first (--json has them); "compute: tensor_core.bf16" wraps after the colon, and an
# unpriced row's reason wraps as prose
OP_COLUMNS = (Column("layer"), Column("op"), Column("n", "right", drop=2),
              Column("FLOP", "right", drop=4), Column("bytes", "right", drop=3),
              Column("SOL", "right"), Column("share", "right", drop=1),
              Column("bound by", wrap=True, min_width=25))
LAYER_STACK = ".*."  # where a layer path names every layer of the stack at once


def layer_prefix(layers: Sequence[str]) -> str | None:
    """The one layer-stack path (`model.layers.*`) that the layer names share, or None.

    Rows of a model are mostly under it, so the table writes `*.mlp.up_proj` for
    `model.layers.*.mlp.up_proj` and says so once; with two stacks (encoder and decoder)
    nothing is shortened, since `*` would then be ambiguous."""
    stacks = {name[:name.index(LAYER_STACK) + 2] for name in layers if LAYER_STACK in name}
    stacks |= {name for name in layers if name.endswith(".*") and "*" not in name[:-1]}
    return next(iter(stacks)) if len(stacks) == 1 else None


def short_layer(name: str, prefix: str | None) -> str:
    """`name` with the shared layer-stack path written as `*` (see `layer_prefix`)."""
    if prefix is None or not (name == prefix or name.startswith(prefix + ".")):
        return name
    return "*" + name[len(prefix):]


def render(projection: Any, out: Console, limit: int | None) -> None:
    cap = projection.capture
    rows = sorted(projection.rows, key=lambda r: -(r.sol_time_s or 0.0))
    shown = rows if limit is None else rows[:limit]
    total = projection.step_time_s
    prefix = layer_prefix([r.layer for r in shown])
    cells: list[list[str | Text]] = []
    floored = False
    for r in shown:
        per_call = None if r.sol_time_s is None else r.sol_time_s / r.count
        binds = per_call is not None and per_call < projection.floor_s
        floored |= binds
        cells.append([short_layer(r.layer, prefix), r.op, str(r.count), fmt.count(r.flops),
                      fmt.nbytes(r.bytes), fmt.seconds(r.sol_time_s) + ("*" if binds else " "),
                      fmt.percent(r.sol_time_s / total if r.sol_time_s and total else None),
                      bound_by(r)])
    title = (f"{projection.phase} on {projection.machine.name}: batch {projection.batch}, "
             f"seq {projection.seq}, context {projection.context}"
             + (f", tp {projection.tp} (per device)" if projection.tp > 1 else ""))
    print_fitted(out, fit_table(OP_COLUMNS, cells, out.width, title))
    floor = projection.floor
    floor_text = (f"the kernel latency floor of {fmt.seconds(floor.per_call_s)}"
                  + (" (assumed)" if floor.assumed else ""))
    notes = []
    if len(shown) < len(rows):
        notes.append(f"{len(rows) - len(shown)} more row(s); --limit 0 shows all")
    if prefix is not None:
        notes.append(f"layer *: {prefix}; n: calls per step; SOL: all n calls")
    if floored:
        notes.append(f"*: each call is under {floor_text}: the floor, not SOL, sets its time")
    totals = projection.total_json()
    units = ", ".join(f"{fmt.count(v, fmt.op_name(u))} {u}"
                      for u, v in sorted(totals["flops_by_unit"].items(), key=lambda kv: -kv[1]))
    for line in (
        *notes,
        f"time per step {fmt.seconds(total)} (sum of SOL); "
        f"{fmt.seconds(totals['time_with_latency_floor_s'])} with each kernel held to "
        + floor_text,
        f"tokens/s {totals['tokens_per_s']:,.0f} ({cap.tokens} new token(s) per step)",
        f"work {fmt.count(totals['flops'])}: {units}",
        f"weights {fmt.nbytes(totals['weight_bytes'])}, KV cache "
        f"{fmt.nbytes(totals['kv_cache_bytes'])} ({cap.kv_dtype}), activation traffic "
        f"{fmt.nbytes(totals['activation_bytes'])}"
        + (f", all-reduce traffic {fmt.nbytes(totals['collective_bytes'])}"
           if projection.tp > 1 else ""),
        *memory_lines(projection, fmt.nbytes),
        *(f"note: {n}" for n in projection.notes),
        *([f"{totals['unpriced_ops']} op(s) unpriced (see the bound by column)"]
          if totals["unpriced_ops"] else []),
    ):
        print_hanging(out, line)


def bound_by(row: Any) -> str:
    """What sets an op's time: `memory: hbm`, `compute: tensor_core.bf16`, `interconnect`,
    or why it is unpriced."""
    if row.sol_time_s is None:
        return f"unpriced: {row.reason}"
    return row.bound if row.binding_pipe == row.bound else f"{row.bound}: {row.binding_pipe}"


def _sweep(config: Any, machine: Machine, base: dict[str, int], texts: tuple[str, ...],
           options: dict[str, Any], as_json: bool) -> None:
    from roofwise.models import sweep  # deferred: torch
    from roofwise.models.capture import Step
    from roofwise.models.serve import StepOptions, captures_for, step_of

    points = sweep.grid(base, sweep.parse_sweeps(texts))
    step_options = StepOptions(options["dtype"], options["kv_dtype"], options["fused"],
                               options["tp"], None, options["allow_long_context"],
                               options["mla"], options["weights"], options["store"])
    keys = list(dict.fromkeys((p["batch"], p["seq"], p["context"]) for p in points))
    # one capture per point, the model built once for all of them, priced under each regime
    captures = dict(zip(keys, captures_for(config, [Step(options["phase"], *k) for k in keys],
                                           step_options), strict=True))

    def step(p: dict[str, int], regime: str | None) -> Any:
        key = (p["batch"], p["seq"], p["context"])
        return step_of(captures[key], config, machine, options["phase"], *key, step_options,
                       regime)

    by_regime = sweep.run_grid(points, step)
    found = sweep.crossovers(points, by_regime, machine)
    if as_json:
        for i, point in enumerate(points):
            for regime in sweep.REGIMES:
                p = by_regime[regime][i]
                _echo({"point": i, **point, "regime": regime, "sol_time_s": p.step_time_s,
                       "tokens_per_s": p.tokens_per_s, "fits": p.memory.fits,
                       "resident_bytes": p.memory.resident_bytes})
        for c in found:
            _echo({"op": c.op, "layer": c.layer, "n": c.n, "k": c.k, "dtype": c.dtype,
                   "compute_bound_from_tokens": dict(c.tokens_by_regime),
                   "first_compute_bound_point": dict(c.first_point_by_regime)})
        return
    out = console()
    cells = [[str(i), str(point["batch"]), str(point["seq"]), str(point["context"]),
              fmt.seconds(s.step_time_s), f"{s.tokens_per_s:,.0f}",
              fmt.seconds(b.step_time_s), f"{b.tokens_per_s:,.0f}"]
             for i, point in enumerate(points)
             for s, b in [(by_regime["sustained"][i], by_regime["burst"][i])]]
    print_fitted(out, fit_table(SWEEP_COLUMNS, cells, out.width,
                                f"{options['phase']} on {machine.name}"))
    prefix = layer_prefix([c.layer for c in found])
    gemm_cells: list[list[str | Text]] = [
        [short_layer(c.layer, prefix), f"{c.n} x {c.k}",
         _tokens(c.tokens_by_regime["sustained"]), _point(c.first_point_by_regime["sustained"]),
         _tokens(c.tokens_by_regime["burst"]), _point(c.first_point_by_regime["burst"])]
        for c in found]
    print_fitted(out, fit_table(GEMM_COLUMNS, gemm_cells, out.width,
                                "where each GEMM turns compute-bound (m = tokens per step)"))
    print_hanging(out, "m >=: the fewest tokens per step at which the GEMM is compute-bound "
                       "(never: not at any m); at point: the first point # of the grid above "
                       "that reaches it (none: no point does)"
                       + (f"; layer *: {prefix}" if prefix is not None else ""))


SWEEP_COLUMNS = (Column("#", "right"), Column("batch", "right"), Column("seq", "right"),
                 Column("context", "right"), Column("sustained\nstep", "right"),
                 Column("\ntokens/s", "right"), Column("burst\nstep", "right"),
                 Column("\ntokens/s ", "right"))
GEMM_COLUMNS = (Column("layer"), Column("n x k", "right"),
                Column("sustained\nm >=", "right"), Column("\nat point", "right"),
                Column("burst\nm >=", "right"), Column("\nat point ", "right"))


def _tokens(value: int | None) -> str:
    return "never" if value is None else f"{value:,}"


def _point(value: int | None) -> str:
    return "none" if value is None else f"#{value}"


def _load(config_path: str, tp: int, no_cache: bool) -> tuple[Any, Any]:
    """The capture store and the config (one --tp shard), the file's warnings said."""
    from roofwise.models.stored import load_sharded, store_from_environment

    store = store_from_environment(no_cache)
    config = load_sharded(config_path, tp, store)
    for warning in config.warnings:
        note(f"roofwise: {warning}")
    return store, config


def _serve(config_path: str, machine_name: str, request_text: str, batches: list[int],
           tp: int, dtype: str, kv_dtype: str | None, regime: str | None, unfused: bool,
           allow_long: bool, as_json: bool, mla: str = "absorbed",
           weights: str | None = None, no_cache: bool = False) -> None:
    from roofwise.models.serve import SERVE_NOTES, StepOptions, parse_request, serve

    machine = load_machine_arg(machine_name)
    assert machine is not None
    request = parse_request(request_text)
    store, config = _load(config_path, tp, no_cache)
    serving = serve(config, machine, request, batches,
                    StepOptions(dtype, kv_dtype, not unfused, tp, regime, allow_long, mla,
                                weights, store))
    if as_json:
        for point in serving.points:
            _echo(point.as_json())
        _echo(serving.summary_json())
        return
    out = console()
    cells: list[list[str | Text]] = []
    for p in serving.points:
        fit = p.memory
        cells.append([f"{p.batch:,}", fmt.seconds(p.ttft_s),
                      "none" if p.tpot_s is None else fmt.seconds(p.tpot_s),
                      f"{p.throughput_tokens_per_s:,.0f}", f"{p.tokens_per_s_per_gpu:,.0f}",
                      f"{_bound_of(p.prefill)} / {_bound_of(p.decode) if p.decodes else '-'}",
                      fmt.nbytes(fit.resident_bytes),
                      "?" if fit.fits is None else ("yes" if fit.fits else "NO")])
    title = (f"serving {request.input:,} in, {request.output:,} out on {machine.name}"
             + (f", tp {tp}" if tp > 1 else "") + " (speed-of-light bounds)")
    print_fitted(out, fit_table(SERVE_COLUMNS, cells, out.width, title))
    first = serving.points[0]
    floor_note = " (assumed floors)" if first.decode_launch.eager_assumed else ""
    tpot = (f"TPOT: a decode step over {first.decode.context:,} cached tokens (the mean of "
            "the generation)" if first.decodes else
            "TPOT: none (output 1: the prefill gives the only token, no decode step runs)")
    lines = [
        f"TTFT: prefill of {request.input:,} tokens per sequence; {tpot}; tok/s: output "
        "tokens of the batch over TTFT + (output-1) x TPOT; memory: per device at the last "
        "token, against " + (fmt.nbytes(first.memory.capacity_bytes)
                            if first.memory.capacity_bytes else "an unknown capacity"),
        _crossover_line(serving.compute_bound_batch, serving.first_compute_bound_batch,
                        serving.regime),
        *_launch_lines(serving.points, floor_note),
        *[f"note: {n}" for n in (*SERVE_NOTES, *serving.notes)],
    ]
    for line in lines:
        print_hanging(out, line)


SERVE_COLUMNS = (Column("batch", "right"), Column("TTFT", "right"), Column("TPOT", "right"),
                 Column("tok/s", "right"), Column("tok/s/GPU", "right", drop=2),
                 Column("bound (prefill / decode)", drop=1), Column("memory", "right"),
                 Column("fits"))


def _bound_of(projection: Any) -> str:
    from roofwise.models.serve import step_bound

    return step_bound(projection)


def _crossover_line(every: int | None, first: int | None, regime: str) -> str:
    if first is None:
        return f"decode GEMMs stay memory-bound at every batch ({regime} rates)"
    tail = ("every weight GEMM of the decode step is compute-bound from batch "
            f"{every:,}" if every is not None else "some never are")
    return (f"decode turns compute-bound ({regime} rates): the first weight GEMM at batch "
            f"{first:,}; {tail} (dense GEMMs; routed experts need num_experts/top_k times "
            "more)")



def _launch_lines(points: Sequence[Any], floor_note: str) -> list[str]:
    """Each step's kernel count and launch floors (one line when every batch launches the
    same kernels), and where the floor, not the GPU, sets the step."""
    def counts(p: Any) -> str:
        prefill = (f"{p.prefill_launch.kernels:,} kernels, eager floor "
                   f"{fmt.seconds(p.prefill_launch.eager_s)}{floor_note}")
        if not p.decodes:
            return f"prefill launches {prefill}; no decode step"
        return (f"decode launches {p.decode_launch.kernels:,} kernels a step: eager floor "
                f"{fmt.seconds(p.decode_launch.eager_s)}, one CUDA graph "
                f"{fmt.seconds(p.decode_launch.graph_s)}; prefill {prefill}")

    same = len({(p.decode_launch.kernels, p.prefill_launch.kernels) for p in points}) == 1
    lines = ([counts(points[0]) + " (every batch)"] if same
             else [f"batch {p.batch:,}: {counts(p)}" for p in points])
    graph = [f"{p.batch:,}" for p in points
             if p.tpot_s is not None and p.decode_launch.graph_s > p.tpot_s]
    eager = [f"{p.batch:,}" for p in points
             if p.tpot_s is not None and p.decode_launch.eager_s > p.tpot_s]
    if eager:
        lines.append("launch-bound decode (the floor above TPOT): eager at batch "
                     + ", ".join(eager) + ("; even as one CUDA graph at batch "
                                           + ", ".join(graph) if graph else
                                           "; one CUDA graph is under TPOT at every batch"))
    return lines
