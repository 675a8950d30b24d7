"""Why a row got its verdict, as bit flags so that a million rows can carry them in one array."""

from __future__ import annotations

from enum import IntFlag


class Reason(IntFlag):
    NONE = 0
    # blank: the model cannot price the row
    NO_MACHINE = 1 << 0
    UNKNOWN_ROOF = 1 << 1
    UNKNOWN_UNIT = 1 << 2  # a unit in flops_by_unit that the machine lacks
    UNIT_RATE_GAP = 1 << 3  # the machine lists the unit but its rate is a gap
    NO_BANDWIDTH = 1 << 4
    ZERO_BYTES = 1 << 5
    BAD_TIME = 1 << 6
    # impossible: above a theoretical ceiling
    ABOVE_THEORETICAL_BANDWIDTH = 1 << 7
    ABOVE_THEORETICAL_RATE = 1 << 8
    # latency
    BELOW_LATENCY_FLOOR = 1 << 9
    FLOOR_ASSUMED = 1 << 10
    # band
    ANOMALY = 1 << 11
    # context that qualifies a number
    UNCALIBRATED_MEMORY = 1 << 14
    UNCALIBRATED_UNIT = 1 << 15
    WALL_TIMING = 1 << 16
    ABOVE_REGIME_WITHIN_ENVELOPE = 1 << 17
    # the floor of the row's timing method: SOL below it, yet the time far above it, so the
    # reason splits the time into floor and the rest (the row stays `below`)
    FLOOR_SPLIT = 1 << 18
    # the floor is a sizeable share of the time: efficiency net of it is shown beside
    FLOOR_SHARE = 1 << 19
    # a second pipe takes >= half the binding pipe's time and its serial sum moves the bound
    SECOND_PIPE = 1 << 20
    # the time sits clearly under its timing method's floor (back-to-back calls overlapped
    # their launches): the row was read against the kernels' own floor instead
    FLOOR_OVERLAPPED = 1 << 21
    # above the DRAM ceiling, but its bytes (read + write) fit in a cache level whose
    # bandwidth is unknown or not exceeded: the data came from the cache (cache_resident)
    CACHE_RESIDENT = 1 << 22
    # above the DRAM ceiling and above the theoretical bandwidth of every cache it fits in
    ABOVE_CACHE_BANDWIDTH = 1 << 23


BLANK_REASONS = (Reason.NO_MACHINE | Reason.UNKNOWN_ROOF | Reason.UNKNOWN_UNIT
                 | Reason.UNIT_RATE_GAP | Reason.NO_BANDWIDTH | Reason.ZERO_BYTES
                 | Reason.BAD_TIME)
IMPOSSIBLE_REASONS = (Reason.ABOVE_THEORETICAL_BANDWIDTH | Reason.ABOVE_THEORETICAL_RATE
                      | Reason.ABOVE_CACHE_BANDWIDTH)
