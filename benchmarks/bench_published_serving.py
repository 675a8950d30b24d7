"""`roofwise model --serve` against published measurements: the projected request time is a
speed-of-light bound, so it must never exceed what a real serving stack measured.

Measured (facts, from NVIDIA's NeMo Framework documentation, "Performance > Llama" page,
docs.nvidia.com/nemo-framework/user-guide/latest/performance/llama.html, "Llama-2 Results,
Inference Performance", Configuration 1 "Chatbot Conversation": input 128 tokens, output 20
tokens, average latency of a request in ms, TP 1, PP 1, one GPU):

| model      | batch | A100 80GB SXM4 | H100 80GB HBM3 |
| Llama-2-7B |     1 |          234.0 |          153.8 |
| Llama-2-7B |     8 |          329.5 |          199.2 |

Projected: the request as `--serve input=128,output=20` prices it, TTFT (the prompt's prefill)
plus 19 decode steps at the mean context (the first output token comes from the prefill), on
the a100-sxm and h100-sxm profiles (datasheet rates: neither is calibrated). The model is
Llama-2-7B's published config.json sizes (meta-llama/Llama-2-7b-hf: hidden 4096, 32 layers, 32
heads, MLP 11008, vocabulary 32000, 4,096 positions), bf16 weights and KV cache. Each
projection is captured once per batch and priced on both cards.

Run: python benchmarks/bench_published_serving.py  (needs transformers; about a minute)
Prints each point's projection, measurement and their ratio, and fails if any projection is
above its measurement.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

LLAMA_2_7B = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": False,
    "rope_theta": 10000.0, "bos_token_id": 1, "eos_token_id": 2,
}
INPUT, OUTPUT = 128, 20
# (batch, machine profile) -> measured average request latency in seconds (table above)
MEASURED_S = {
    (1, "a100-sxm"): 234.0e-3, (1, "h100-sxm"): 153.8e-3,
    (8, "a100-sxm"): 329.5e-3, (8, "h100-sxm"): 199.2e-3,
}
SOURCE = ("NVIDIA NeMo Framework docs, Performance > Llama, Llama-2 inference, "
          "Configuration 1 (input 128, output 20), TP1 PP1")


def main() -> int:
    from roofwise.models.capture import capture_step
    from roofwise.models.config import load_config
    from roofwise.models.project import project
    from roofwise.models.serve import Request
    from roofwise.profiles.load import builtin_machines

    machines = builtin_machines()
    request = Request(INPUT, OUTPUT)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "llama-2-7b.json"
        path.write_text(json.dumps(LLAMA_2_7B))
        config = load_config(path)
        worst = 0.0
        print(f"Llama-2-7B, input {INPUT}, output {OUTPUT}; measured: {SOURCE}")
        print(f"{'batch':>5}  {'machine':<9} {'TTFT':>9} {'TPOT':>9} {'projected':>10} "
              f"{'measured':>9} {'proj/meas':>9}")
        for batch in sorted({b for b, _ in MEASURED_S}):
            prefill = capture_step(config, "prefill", batch, INPUT, 0)
            decode = capture_step(config, "decode", batch, 1, request.mean_decode_context)
            for (b, name), measured_s in sorted(MEASURED_S.items()):
                if b != batch:
                    continue
                machine = machines[name]
                ttft = project(prefill, machine, "prefill", batch, INPUT, 0).step_time_s
                tpot = project(decode, machine, "decode", batch, 1,
                               request.mean_decode_context).step_time_s
                projected = ttft + (OUTPUT - 1) * tpot
                ratio = projected / measured_s
                worst = max(worst, ratio)
                print(f"{batch:>5}  {name:<9} {ttft * 1e3:>7.2f}ms {tpot * 1e3:>7.3f}ms "
                      f"{projected * 1e3:>8.1f}ms {measured_s * 1e3:>7.1f}ms {ratio:>9.2f}")
    print(f"largest ratio {worst:.2f}: " + ("every projection is under its measurement"
                                           if worst <= 1 else "A PROJECTION EXCEEDS ITS "
                                                              "MEASUREMENT"))
    return 0 if worst <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
