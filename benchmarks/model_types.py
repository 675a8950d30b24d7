"""`roofwise model` on every causal-LM model type the installed transformers ships, each built
from transformers' own default config (written by its maintainers, not by us): how many
project, how many are refused in one line and why, and that none ends in a traceback.

Each type runs as its own process (`roofwise model CONFIG -m h200 --phase decode --context 64
--json --no-cache`, or `--phase prefill --seq 512`), so that one model's state never reaches
another. A projection that
leaves ops unpriced names them. Default configs are full size (their layer counts), which
is what the capture's repeated-layer recording is for.

Run: python benchmarks/model_types.py [--phase prefill] [--only TYPE ...]
         > benchmarks/results/model-types-DATE.txt
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="these model types only")
    parser.add_argument("--phase", choices=("decode", "prefill"), default="decode")
    args = parser.parse_args()
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    types = sorted(args.only or MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    roofwise = str(Path(sys.executable).with_name("roofwise"))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, transformers "
          f"{transformers.__version__}, {len(types)} causal-LM model types")
    step = (["--phase", "decode", "--context", "64"] if args.phase == "decode" else
            ["--phase", "prefill", "--seq", "512"])
    print(f"# command: python benchmarks/model_types.py --phase {args.phase} "
          f"(roofwise model CONFIG -m h200 {' '.join(step)} --json --no-cache)")
    print()
    print("| model type | outcome | seconds | what |")
    print("| --- | --- | ---: | --- |")
    outcomes: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as folder:
        for model_type in types:
            try:
                config = CONFIG_MAPPING[model_type]().to_dict()
            except Exception as exc:  # transformers' own default does not validate
                outcomes["no default config"] += 1
                print(f"| {model_type} | no default config | | transformers: "
                      f"{type(exc).__name__} |")
                continue
            name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]
            config.update(model_type=model_type,
                          architectures=[name if isinstance(name, str) else name[0]])
            path = Path(folder) / f"{model_type}.json"
            path.write_text(json.dumps(config, default=str))
            start = time.perf_counter()
            try:
                done = subprocess.run([roofwise, "model", str(path), "-m", "h200", *step,
                                       "--json", "--no-cache"],
                                      capture_output=True, text=True, timeout=300,
                                      env={**os.environ, "PYTHONWARNINGS": "ignore"})
            except subprocess.TimeoutExpired:
                outcomes["timed out"] += 1
                print(f"| {model_type} | timed out | 300 | |")
                continue
            seconds = time.perf_counter() - start
            err = done.stderr.strip().splitlines()
            if "Traceback" in done.stderr or done.returncode not in (0, 2):
                outcome, what = "CRASHED", (err[-1] if err else f"exit {done.returncode}")
            elif done.returncode == 2:
                outcome = "refused in one line" if len(err) == 1 else "refused (several lines)"
                what = err[-1].split(f"{path}", 1)[-1].lstrip(": ")
            else:
                rows = [json.loads(line) for line in done.stdout.splitlines()]
                unpriced = sorted({r["op"] for r in rows[:-1] if r.get("sol_time_s") is None})
                outcome = "projected" if not unpriced else "projected, ops unpriced"
                what = ", ".join(unpriced)
            outcomes[outcome] += 1
            print(f"| {model_type} | {outcome} | {seconds:.1f} | "
                  f"{what[:160].replace('|', '/')} |", flush=True)
    print()
    print("# " + "; ".join(f"{k}: {v}" for k, v in outcomes.most_common()))


if __name__ == "__main__":
    main()
