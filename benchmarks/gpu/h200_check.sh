#!/usr/bin/env bash
# One prepared device check for roofwise on a lent H200 (issue #4). Not run yet: no H200 was
# lent in the session that wrote it. Run it through the device tool from the repo root:
#     run(command="bash benchmarks/gpu/h200_check.sh", timeout_s=590)
# It needs nothing from outside the machine (torch, triton, numpy, PyYAML, click, rich,
# matplotlib are in the image, KINDS.md); about 4 minutes expected; the per-step timeouts add up to 600 s. Everything lands in $OUT (7 files):
#   env.txt              card, driver, clocks, power limit, torch/triton versions, before and after
#   calibrate_quick.log  every measured window of `roofwise calibrate --quick` (clocks, spread)
#   h200_quick.yaml      the quick profile
#   calibrate_full.log   the same for the full calibration
#   h200_calibrated.yaml the full profile (load it with --machine PATH)
#   records.jsonl        gemm, rmsnorm and the case study (eager and torch.compile) timed
#   summary.txt          profile vs built-in h200 (differences above 3%) and analyze's verdicts
set -uo pipefail
OUT=${OUT:-/tmp/roofwise-h200}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."

smi() { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,power.draw,temperature.gpu --format=csv 2>&1; }
{ echo "== before, $(date -u +%FT%TZ)"; smi
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
} > "$OUT/env.txt" 2>&1

# No registry is reachable there: install without build isolation or dependencies.
if ! python3 -m pip install -q --no-deps --no-build-isolation -e . >> "$OUT/env.txt" 2>&1; then
  echo "pip install -e . failed; using PYTHONPATH=src" >> "$OUT/env.txt"
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
PYRW='import sys; from roofwise.cli import main; sys.exit(main(sys.argv[1:]))'
rw() { local limit=$1; shift; timeout "$limit" python3 -c "$PYRW" "$@" 2>&1; }

echo "== calibrate --quick"
rw 90 calibrate --quick --out "$OUT/h200_quick.yaml" --log "$OUT/calibrate_quick.log" | tail -40
echo "== calibrate (full)"
rw 240 calibrate --out "$OUT/h200_calibrated.yaml" --log "$OUT/calibrate_full.log" | tail -60

PROFILE="$OUT/h200_calibrated.yaml"; [ -f "$PROFILE" ] || PROFILE="$OUT/h200_quick.yaml"; [ -f "$PROFILE" ] || PROFILE=h200
echo "== bench (profile $PROFILE)"
REC="$OUT/records.jsonl"
rw 45 bench gemm --sweep m=4096,8192 --shape n=8192 --shape k=8192 --shape dtype=bf16 --machine h200 --reps 30 -o "$REC" | tail -5
rw 45 bench rmsnorm --sweep rows=8192,32768 --shape hidden=8192 --machine h200 --reps 50 -o "$REC" | tail -5
rw 45 bench rmsnorm --sweep rows=8192,32768 --shape hidden=8192 --machine h200 --reps 50 --compile -o "$REC" | tail -5
rw 45 bench qk_norm_rope_quant --machine h200 --reps 50 -o "$REC" | tail -5
rw 90 bench qk_norm_rope_quant --machine h200 --reps 50 --compile -o "$REC" | tail -5

{ echo "== after, $(date -u +%FT%TZ)"; smi; } >> "$OUT/env.txt" 2>&1
python3 benchmarks/gpu/compare_profiles.py "$PROFILE" "$REC" > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
