"""Multi-head latent attention (DeepSeek-V2/V3 and kin) in the form a serving stack runs it.

transformers caches the compressed latent (kv_lora_rank wide, plus the shared rope key) and at
every step re-expands the whole cache through `kv_b_proj` into per-head keys and values
(`expand_kv`), then runs attention over h heads of qk_nope + qk_rope (keys) and v_head_dim
(values). That is the expanded form: at decode it costs a (cached tokens x kv_lora_rank) @
(kv_lora_rank x h(nope + v)) GEMM and the expanded K and V per step.

FlashMLA, vLLM and SGLang decode in the absorbed form instead: `W_UK` (kv_b_proj's key rows)
is absorbed into the query and `W_UV` (its value rows) into the output, so attention runs as
MQA directly on the latent cache, read once:
- q absorb: per head, q_nope (tokens x nope) @ W_UK (nope x rank), a batched GEMM over heads;
- latent attention: h query heads over one shared KV head, keys rank + rope wide, values the
  first `rank` columns of the same latent (no second read);
- out absorb: per head, (tokens x rank) @ W_UV (rank x v), a batched GEMM over heads;
then o_proj as before. The weights are the same bytes (kv_b_proj is W_UK and W_UV).

Prefill stays expanded in both forms: the serving stacks run prompts through the expanded
(compute-friendly, MHA) kernels and switch to the absorbed one for decode.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from roofwise.ledgers.ledger import Ledger
from roofwise.ops.attention import attention
from roofwise.ops.gemm import batched_gemm

MLA_FORMS = ("absorbed", "expanded")


def is_mla(module: Any) -> bool:
    return all(hasattr(module, name) for name in (
        "kv_b_proj", "expand_kv", "kv_lora_rank", "qk_nope_head_dim", "v_head_dim",
        "qk_rope_head_dim", "num_heads"))


def absorb(modules: Any, recorder: Any, captured_op: Any, layer_of: Any, dtype_of: Any
           ) -> list[tuple[Any, Any]]:
    """Replace each MLA module's `expand_kv` (for this step) by the absorbed form's ops;
    `modules`: (path, module, ...) of each module the step runs.

    Returns (module, saved) pairs for `restore`. `captured_op(layer, op, shapes, ledger)`
    makes one captured op; `layer_of(path)` the layer pattern; `dtype_of(tensor)` its dtype
    name. The recorder's `skip_attention` makes the next attention call unrecorded (its
    kernel is the latent attention recorded here)."""
    patched = []
    for name, module, *_ in modules:
        if not is_mla(module):
            continue
        original = module.expand_kv

        def expand(kv_nope: Any, k_rot: Any, module: Any = module, name: str = name,
                   original: Any = original) -> Any:
            if recorder.muted:  # inside a fused region or the cache's warm-up: not priced
                return original(kv_nope, k_rot)
            batch, _, kv_len, rank = (int(s) for s in kv_nope.shape)
            for op, shapes, ledger in absorbed_ledgers(
                    batch=batch, seq=recorder.seq, kv_len=kv_len, heads=int(module.num_heads),
                    rank=rank, nope=int(module.qk_nope_head_dim),
                    rope=int(module.qk_rope_head_dim), v=int(module.v_head_dim),
                    dtype=dtype_of(kv_nope), kv_dtype=recorder.kv_dtype):
                recorder.captured.append(captured_op(layer_of(name), op, shapes, ledger))
            recorder.muted += 1
            try:
                return original(kv_nope, k_rot)
            finally:
                recorder.muted -= 1
                recorder.skip_attention += 1

        module.expand_kv = expand
        patched.append((module, original))
    return patched


def restore(patched: list[tuple[Any, Any]]) -> None:
    for module, _ in patched:
        del module.expand_kv  # the class's method shows through again


def absorbed_ledgers(batch: int, seq: int, kv_len: int, heads: int, rank: int, nope: int,
                     rope: int, v: int, dtype: str, kv_dtype: str
                     ) -> list[tuple[str, str, Ledger]]:
    """The three kernels of absorbed MLA for one layer and step (the module docstring)."""
    tokens = batch * seq
    q_absorb = replace(batched_gemm(heads, tokens, rank, nope, dtype=dtype),
                       name="mla_q_absorb")
    latent = attention(batch=batch, q_len=seq, kv_len=kv_len, q_heads=heads, kv_heads=1,
                       head_dim=rank + rope, causal=True, dtype=dtype, kv_dtype=kv_dtype)
    latent = _values_from_keys(latent, batch, seq, heads, rank + rope, rank)
    out_absorb = replace(batched_gemm(heads, tokens, v, rank, dtype=dtype),
                         name="mla_out_absorb")
    return [
        ("mla q absorb (W_UK)", f"{heads} heads x [{tokens}, {nope}] @ [{nope}, {rank}] "
                                f"{dtype}", q_absorb),
        ("attention (fused, MLA latent)", f"q {batch}x{seq}x{heads}x{rank + rope}, latent "
                                          f"{batch}x{kv_len}x1x{rank + rope} (v {rank}) "
                                          f"{kv_dtype}", latent),
        ("mla out absorb (W_UV)", f"{heads} heads x [{tokens}, {rank}] @ [{rank}, {v}] "
                                  f"{dtype}", out_absorb),
    ]


def _values_from_keys(ledger: Ledger, batch: int, seq: int, heads: int, d: int, dv: int
                      ) -> Ledger:
    """Attention whose values are the first dv columns of its keys: V is not read again, the
    output and the PV work are dv wide."""
    tensors = tuple(
        replace(t, shape=(batch, seq, heads, dv)) if t.name == "out" else t
        for t in ledger.tensors if t.name != "v")
    work = tuple(replace(w, ops=w.ops * dv / d, label=w.label.replace("2*d", "2*dv"))
                 if w.label.startswith(("PV", "output normalisation")) else w
                 for w in ledger.work)
    return replace(ledger, name="attention_mla_latent", tensors=tensors, work=work,
                   notes=(*ledger.notes, f"values: the first {dv} of the {d} latent columns "
                                         "(read once, with the keys)"))

