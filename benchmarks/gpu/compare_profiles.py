"""Print a calibrated profile against the built-in h200 (every difference above 3%) and the
verdicts of the benchmark records priced on the calibrated profile. Used by h200_check.sh."""

from __future__ import annotations

import sys
from pathlib import Path

from roofwise.output.analysis import analyze
from roofwise.profiles.load import builtin_machines, resolve_machine
from roofwise.records.read import read_records

THRESHOLD = 0.03


def main(profile_path: str, records_path: str) -> int:
    builtin = builtin_machines()["h200"]
    measured = resolve_machine(profile_path)
    print(f"profile {profile_path} against built-in h200 (differences above {THRESHOLD:.0%})")
    for level in measured.memory.values():
        ref = builtin.memory.get(level.name)
        for mix, frac in level.calibration_by_mix.items():
            old = ref.calibration_by_mix.get(mix) if ref else None
            flag = "" if old is None or abs(frac / old - 1) <= THRESHOLD else "  <-- >3%"
            print(f"  {level.name:6s} {mix:9s} measured {frac:.4f}  built-in {old}{flag}")
    for unit in measured.units.values():
        ref_unit = builtin.units.get(unit.key)
        for regime, frac in unit.calibration_by_regime.items():
            old = ref_unit.calibration_by_regime.get(regime) if ref_unit else None
            flag = "" if old is None or abs(frac / old - 1) <= THRESHOLD else "  <-- >3%"
            print(f"  {unit.key:18s} {regime:9s} measured {frac:.4f}  built-in {old}{flag}")
    for timing, floor in measured.latency_floors.by_timing.items():
        print(f"  latency floor {timing:6s} {floor.per_call_s:.3e} s per call + "
              f"{floor.per_kernel_s:.3e} s per further kernel "
              f"({'assumed' if floor.assumed else 'measured'})")
    for note in measured.notes:
        print(f"  note: {note}")
    if not Path(records_path).is_file():
        print("no records")
        return 0
    loaded = read_records(records_path)
    result = analyze(loaded.columns, {measured.name: measured}, machine=measured)
    print(f"\n{len(loaded.columns)} records priced on {measured.name}:")
    for row in result.iter_rows():
        print(f"  {row['op']:20s} {str(row.get('workload'))[:60]:60s} {row['time_s']:.3e} s "
              f"eff {row.get('efficiency')} {row['verdict']} {row.get('reasons')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
