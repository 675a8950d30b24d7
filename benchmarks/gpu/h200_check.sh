#!/usr/bin/env bash
# One prepared device check for roofwise on a lent H200 (issue #4). Not run yet: no H200 was
# lent in the sessions that wrote it. Run it through the device tool from the repo root:
#     run(command="bash benchmarks/gpu/h200_check.sh", timeout_s=590)
# It needs nothing from outside the machine (torch, triton, numpy, PyYAML, click, rich,
# matplotlib and Nsight Compute are in the image, KINDS.md). Every step has its own timeout,
# capped by what is left of a 540 s budget, so the whole script ends within about 9 minutes;
# a step that times out is said so and the next one runs. Everything lands in $OUT, 8 files
# (the device tool brings back at most 8):
#   env.txt              card, driver, clocks, power limit, torch/triton/ncu versions, before
#                        and after; the steps' own messages
#   calibrate.log        every measured window (clocks, spread) of `roofwise calibrate --quick`,
#                        then of the full calibration
#   h200_quick.yaml      the quick profile
#   h200_calibrated.yaml the full profile (load it with --machine PATH)
#   records.jsonl        gemm, rmsnorm and the case study (eager and torch.compile) timed
#   ncu_h200.csv         `ncu --csv --clock-control none` DRAM read/write bytes and kernel time
#                        of one rmsnorm (eager), one case study (eager) and one rmsnorm
#                        (torch.compile), separated by spin_kernel markers: a real fixture
#   audit.txt            `roofwise audit` of each of those sections against its ledger (the
#                        kernels of one call summed, each shown beneath)
#   summary.txt          profile vs built-in h200 (differences above 3%) and analyze's verdicts
set -uo pipefail
OUT=${OUT:-/tmp/roofwise-h200}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d)
BUDGET_S=540
LOG="$OUT/env.txt"

# timeout for a step: its own limit, capped by what is left of the budget (at least 5 s)
limit() { local want=$1 left=$((BUDGET_S - SECONDS - 5)); [ "$left" -lt 5 ] && left=5
          [ "$want" -lt "$left" ] && echo "$want" || echo "$left"; }
step() { echo "== $1 (t=${SECONDS}s)" | tee -a "$LOG"; }

smi() { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,power.draw,temperature.gpu --format=csv 2>&1; }
{ echo "== before, $(date -u +%FT%TZ)"; smi
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
  ncu --version 2>&1 | tail -1
} > "$LOG" 2>&1

# No registry is reachable there: install without build isolation or dependencies.
if ! timeout 90 python3 -m pip install -q --no-deps --no-build-isolation -e . >> "$LOG" 2>&1; then
  echo "pip install -e . failed; using PYTHONPATH=src" >> "$LOG"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PYRW='import sys; from roofwise.cli import main; sys.exit(main(sys.argv[1:]))'
rw() { local t; t=$(limit "$1"); shift; timeout "$t" python3 -c "$PYRW" "$@" 2>&1
       local rc=$?; [ "$rc" -eq 124 ] && echo "(timed out after ${t}s)"; return "$rc"; }

# The card's own built-in profile supplies the theoretical rates; if the driver names it in a
# way no profile lists, say so and divide by the h200 datasheet rates explicitly (--force).
THEORY=()
if ! python3 -c "import sys, torch; from roofwise.profiles.load import builtin_machines, match_device
sys.exit(match_device(torch.cuda.get_device_name(0), builtin_machines().values()).machine is None)" >> "$LOG" 2>&1; then
  echo "no built-in profile matches this card's name: --theoretical-from h200 --force" | tee -a "$LOG"
  THEORY=(--theoretical-from h200 --force)
fi

step "calibrate --quick"
rw 75 calibrate --quick "${THEORY[@]}" --out "$OUT/h200_quick.yaml" --log "$WORK/quick.log" | tail -40
{ echo "# roofwise calibrate --quick"; cat "$WORK/quick.log" 2>/dev/null; } > "$OUT/calibrate.log"

step "ncu: rmsnorm | case study | rmsnorm compiled"
NCU_CSV="$OUT/ncu_h200.csv"
timeout "$(limit 120)" ncu --csv --clock-control none --profile-from-start off \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
  python3 benchmarks/gpu/ncu_driver.py run > "$NCU_CSV" 2>> "$LOG"
echo "ncu exit $? ($(wc -l < "$NCU_CSV") lines)" | tee -a "$LOG"
python3 benchmarks/gpu/ncu_driver.py split "$NCU_CSV" "$WORK/ncu" >> "$LOG" 2>&1
{ for part in "1 rmsnorm rows=8192 hidden=4096 (eager)" "2 qk_norm_rope_quant (eager)" \
              "3 rmsnorm rows=8192 hidden=4096 (torch.compile)"; do
    set -- $part; n=$1; op=$2
    shapes=(); [ "$op" = rmsnorm ] && shapes=(--shape rows=8192 --shape hidden=4096)
    echo "== part$n: ${part#* }"
    if [ -f "$WORK/ncu/part$n.csv" ]; then
      rw 20 audit --ncu-csv "$WORK/ncu/part$n.csv" --op "$op" "${shapes[@]}"
      echo "(audit exit $?: 0 no FAIL, 1 a FAIL, 2 bad input)"
    else echo "no part$n in the report"; fi
  done; } > "$OUT/audit.txt" 2>&1
cat "$OUT/audit.txt"

step "bench"
REC="$OUT/records.jsonl"
rw 40 bench gemm --sweep m=4096,8192 --shape n=8192 --shape k=8192 --shape dtype=bf16 --machine h200 --reps 30 -o "$REC" | tail -5
rw 35 bench rmsnorm --sweep rows=8192,32768 --shape hidden=8192 --machine h200 --reps 50 -o "$REC" | tail -5
rw 45 bench rmsnorm --sweep rows=8192,32768 --shape hidden=8192 --machine h200 --reps 50 --compile -o "$REC" | tail -5
rw 35 bench qk_norm_rope_quant --machine h200 --reps 50 -o "$REC" | tail -5
rw 60 bench qk_norm_rope_quant --machine h200 --reps 50 --compile -o "$REC" | tail -5

step "calibrate (full)"
rw 170 calibrate "${THEORY[@]}" --out "$OUT/h200_calibrated.yaml" --log "$WORK/full.log" | tail -60
{ echo "# roofwise calibrate (full)"; cat "$WORK/full.log" 2>/dev/null; } >> "$OUT/calibrate.log"

{ echo "== after, $(date -u +%FT%TZ), t=${SECONDS}s"; smi; } >> "$LOG" 2>&1
PROFILE="$OUT/h200_calibrated.yaml"; [ -f "$PROFILE" ] || PROFILE="$OUT/h200_quick.yaml"; [ -f "$PROFILE" ] || PROFILE=h200
timeout "$(limit 20)" python3 benchmarks/gpu/compare_profiles.py "$PROFILE" "$REC" > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
rm -rf "$WORK"
ls "$OUT"
