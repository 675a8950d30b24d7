"""The benchmark's records judged by a hand-written polars pipeline that writes what
`roofwise analyze --json` writes: the same rows in the same order, the same 30 fields (every
field but `lint`), the same verdicts and the same reasons, word for word.

It is what a careful engineer writes for this one job, knowing the records (events timing,
one kernel per call, no unit splits; p10/p90 where the file has them; one card, or several
told apart by `device`) and reading the profiles' numbers from roofwise (the constants
argument, as `bench_end_to_end.constants_full` gives them, or {"by_device": {device: those}}
for a fleet): no validation of the input, no lint, no streaming. The benchmark
checks that its output equals roofwise's, field for field, before it times either; a pipeline
that wrote less would be a lighter job, not a baseline.

Run: python benchmarks/by_hand_same_output.py RECORDS KIND CONSTANTS_JSON > out.jsonl
"""

import json
import sys

import numpy as np
import polars as pl


def fixed(values: np.ndarray, digits: int) -> pl.Series:
    """`f"{v:.{digits}f}"` of every value (finite, non-negative, below 1e15): integers by the
    engine; the rare value within a hair of a rounding tie by Python, which rounds the exact
    binary value."""
    scaled = values * 10.0 ** digits
    whole = pl.Series(np.round(scaled).astype(np.int64))
    unit = 10 ** digits
    text = ((whole // unit).cast(pl.String) + "."
            + (whole % unit).cast(pl.String).str.zfill(digits))
    at = np.flatnonzero(np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6)
    if len(at):
        text = text.scatter(at, [f"{v:.{digits}f}" for v in values[at].tolist()])
    return text


def percent(values: np.ndarray) -> pl.Series:
    """`fmt.percent`: one decimal; "<0.1%" for a reading above zero that would print 0.0%."""
    hundred = values * 100
    text = fixed(hundred, 1) + "%"
    tiny = np.flatnonzero((hundred > 0) & (hundred < 0.05))
    return text.scatter(tiny, "<0.1%") if len(tiny) else text


def seconds(values: np.ndarray) -> pl.Series:
    """`fmt.seconds`: 3 decimals in s, ms, us or ns."""
    step = np.select([values >= 1.0, values >= 1e-3, values >= 1e-6], [0, 1, 2], 3)
    scale = np.array([1.0, 1e-3, 1e-6, 1e-9])[step]
    unit = pl.Series([" s", " ms", " us", " ns"]).gather(step)
    return fixed(values / scale, 3) + unit


def megabytes(values: np.ndarray) -> pl.Series:
    """`fmt.nbytes`: 2 decimals in B, kB, MB, GB or TB."""
    step = np.select([values >= 1e12, values >= 1e9, values >= 1e6, values >= 1e3], [0, 1, 2, 3],
                     4)
    scale = np.array([1e12, 1e9, 1e6, 1e3, 1.0])[step]
    unit = pl.Series([" TB", " GB", " MB", " kB", " B"]).gather(step)
    return fixed(values / scale, 2) + unit


def choose(mask: np.ndarray, yes: str, no: str) -> pl.Series:
    return pl.Series([no, yes]).gather(mask.astype(np.int64))


NUMBERS = ("flops", "bytes", "time_s", "read_bytes", "write_bytes", "time_p10_s", "time_p90_s")


def main() -> None:
    path, kind, c = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if kind == "csv":  # a CSV's cells are text; the contract's numbers are numbers
        header = pl.read_csv(path, n_rows=0).columns
        f = pl.read_csv(path, infer_schema=False,
                        schema_overrides={k: pl.Float64 for k in NUMBERS if k in header})
    else:
        f = {"jsonl": pl.read_ndjson, "parquet": pl.read_parquet}[kind](path)
    if "by_device" not in c:
        judged(f, c).write_ndjson(sys.stdout.buffer)
        return
    # a fleet: each card's rows with its own numbers, then back in file order
    f = f.with_row_index("_row")
    parts = [judged(part, c["by_device"][str(device)])
             for (device,), part in f.group_by("device")]
    pl.concat(parts).sort("_row").drop("_row").write_ndjson(sys.stdout.buffer)


def judged(f: pl.DataFrame, c: dict) -> pl.DataFrame:
    """`f` with the judgement's fields and reasons, on the card whose numbers are `c`."""
    n = f.height
    units = c["units"]
    roof = f["roof"]

    def per_roof(field: int, dtype: type = pl.Float64) -> np.ndarray:
        return roof.replace_strict({k: v[field] for k, v in units.items()},
                                   return_dtype=dtype).to_numpy()

    # The numbers by numpy (whose division is exact, as roofwise's; polars' division by a
    # scalar multiplies by its inverse, a last bit apart).
    rate, envelope_rate, theoretical = per_roof(0), per_roof(1), per_roof(2)
    flops, nbytes, time_s = (f[k].to_numpy() for k in ("flops", "bytes", "time_s"))
    memory_s, compute_s = nbytes / c["bw"], flops / rate
    sol = np.maximum(memory_s, compute_s)
    memory = memory_s >= compute_s
    envelope_sol = np.maximum(nbytes / c["envelope_bw"], flops / envelope_rate)
    efficiency, envelope_efficiency = sol / time_s, envelope_sol / time_s
    achieved = nbytes / time_s
    over_bandwidth = achieved > c["theory_bw"]
    over_rate = time_s < flops / theoretical
    # above the DRAM ceiling (theoretical, or 105% of the envelope) with bytes that fit in the
    # L2 (whose bandwidth is a gap): served by the cache, unless the FLOPs are impossible
    above = (achieved > min(c["theory_bw"], 1.05 * c["envelope_bw"])) & (nbytes > 0)
    has_l2 = c.get("l2_bytes") is not None  # a card whose profile states no L2 has no cache rule
    l2_bytes = c["l2_bytes"] or 0.0
    cached = above & (nbytes <= l2_bytes) if has_l2 else np.zeros(n, dtype=bool)
    # above HBM's theoretical rate and larger than the L2: the L2 can hold what a call reads
    # before it and what it writes after, so HBM moved at least the rest, split as the record
    # allows in the L2's favour; within HBM's theoretical rate, the L2 served a part
    larger = over_bandwidth & ~cached & has_l2
    reads = f["read_bytes"].to_numpy() if "read_bytes" in f.columns else np.full(n, np.nan)
    writes = f["write_bytes"].to_numpy() if "write_bytes" in f.columns else np.full(n, np.nan)
    low = np.maximum(nbytes - np.where(np.isnan(writes), nbytes, np.minimum(writes, nbytes)), 0)
    high = np.maximum(np.where(np.isnan(reads), nbytes, np.minimum(reads, nbytes)), low)

    def hbm_share(r: np.ndarray) -> np.ndarray:
        return np.maximum(r - l2_bytes, 0) + np.maximum(nbytes - r - l2_bytes, 0)

    dram = np.where(larger, np.minimum(hbm_share(np.clip(l2_bytes, low, high)),
                                       hbm_share(np.clip(nbytes - l2_bytes, low, high))), np.nan)
    in_part = larger & (dram / time_s <= c["theory_bw"])
    cached |= in_part
    in_cache = cached & ~over_rate
    over_bandwidth &= ~cached
    impossible = over_bandwidth | over_rate
    at_ceiling, anomaly = efficiency >= 0.8, envelope_efficiency > 1.05
    compute_anomaly = in_cache & (envelope_sol > nbytes / c["envelope_bw"] * (1 + 1e-12)) & (
        envelope_efficiency > 1.05)
    anomaly &= ~in_cache | compute_anomaly
    at_ceiling &= ~in_cache
    # the events floor, or the kernel floor where the time sits clearly under the events one
    # (back-to-back calls overlapped their launches)
    time_low, time_high = time_s, time_s * 1.05
    if "time_p10_s" in f.columns:  # the noise: the floor is read at p10, overlap at p90
        time_low = np.fmin(time_s, f["time_p10_s"].to_numpy())
        time_high = np.fmax(time_high, f["time_p90_s"].to_numpy())
    overlapped = time_high < c["events_floor"]
    floor = np.where(overlapped, c["kernel_floor"], c["events_floor"])
    in_band = at_ceiling & ~anomaly
    under = sol < floor
    latency = under & (floor >= 0.5 * time_low) & ~in_band & ~in_cache
    split = under & ~latency & ~in_band & ~in_cache
    rest = time_s - floor
    net = sol / rest
    share = (split | (floor >= 0.2 * time_s)) & ~latency & (rest > 0) & (net <= 1.0) & ~in_cache
    resident = in_cache & ~compute_anomaly
    code = np.select([impossible, resident, latency, anomaly, at_ceiling], [4, 6, 3, 2, 0], 1)
    verdict = pl.Series(["at_ceiling", "below", "anomaly", "latency_bound", "impossible",
                         "blank", "cache_resident"]).gather(code)
    reading = code <= 1

    # The reasons, in the order roofwise says them: each template over its own rows.
    sentences: list[pl.Series] = []

    def say(rows: np.ndarray, text: "pl.Series | str") -> None:
        """A sentence for `rows`: one text, or one per row of `rows`."""
        at = np.flatnonzero(rows)
        column = pl.repeat(None, n, dtype=pl.String, eager=True)
        if len(at):
            column = column.scatter(at, text)
        sentences.append(column.alias(f"s{len(sentences)}"))

    floor_names = [f"the events floor {c['events_floor'] * 1e6:.3f} us (assumed)",
                   f"the kernel floor {c['kernel_floor'] * 1e6:.3f} us (assumed; the time is "
                   "under the events floor, so launches overlapped)"]

    def floor_name(rows: np.ndarray) -> pl.Series:
        return choose(overlapped[rows], floor_names[1], floor_names[0])

    l2 = f"{(c.get('l2_bytes') or 0.0) / 1e6:.2f} MB l2"
    rows = over_bandwidth
    say(rows, "bytes/time " + fixed(achieved[rows] / 1e9, 1) + f" GB/s exceeds {c['memory']} "
        f"theoretical {c['theory_bw'] / 1e9:.0f} GB/s" + (
            (", and its working set of " + megabytes(nbytes[rows]) + f" is larger than the "
             f"{l2}: holding up to {l2[:-3]} of what it reads before it runs and of what it "
             f"writes after, that cache still leaves {c['memory']} at least "
             + megabytes(dram[rows]) + " in the time, " + fixed(dram[rows] / time_s[rows] / 1e9, 1)
             + " GB/s: physically impossible, so the bytes or the time are wrong") if has_l2 else
            ": physically impossible, so the bytes or the time are wrong"))
    rows = resident & ~in_part
    say(rows, "bytes/time " + fixed(achieved[rows] / 1e9, 1) + " GB/s is above " + choose(
        over_bandwidth[rows] | (achieved[rows] > c["theory_bw"]),
        f"{c['memory']} theoretical {c['theory_bw'] / 1e9:.0f} GB/s",
        f"105% of the {c['memory']} envelope {c['envelope_bw'] / 1e9:.0f} GB/s") + ", but its "
        + "working set of " + megabytes(nbytes[rows]) + f" fits in the {l2}: cache-resident, the "
        f"data came from the cache, so the {c['memory']} roof is no reading; the l2 bandwidth is "
        "a gap (`roofwise calibrate` measures it)")
    rows = resident & in_part
    if rows.any():
        left = dram[rows]
        said_left = ("which leaves at least " + megabytes(left) + f" to {c['memory']}, "
                     + fixed(left / time_s[rows] / 1e9, 1) + " GB/s, within its theoretical rate")
        said_left = said_left.scatter(np.flatnonzero(left <= 0), "which can be all of it")
        say(rows, "bytes/time " + fixed(achieved[rows] / 1e9, 1) + f" GB/s is above "
            f"{c['memory']} theoretical {c['theory_bw'] / 1e9:.0f} GB/s, and its working set of "
            + megabytes(nbytes[rows]) + f" is larger than the {l2}, but that cache can hold up to "
            f"{l2[:-3]} of what it reads before it runs and as much of what it writes after, "
            + said_left + f": cache-resident in part, so the {c['memory']} roof alone is no "
            "reading (else the bytes or the time are wrong: time it with the l2 flushed to "
            "tell); the l2 bandwidth is a gap (`roofwise calibrate` measures it)")
    else:
        say(rows, "")
    for key, (_, _, peak, _, ops) in units.items():
        rate_now = flops / time_s
        rows = over_rate & (roof == key).to_numpy() & (rate_now > peak)
        if rows.any():
            say(rows, f"{key} at " + fixed(rate_now[rows] / 1e12, 2)
                + f" T{ops}/s exceeds its theoretical {peak / 1e12:.2f} T{ops}/s: "
                  "physically impossible")
    rows = latency
    say(rows, "the " + seconds(time_s[rows]) + " measured is "
        + fixed(time_s[rows] / floor[rows], 2) + " x " + floor_name(rows) + " and SOL is "
        + seconds(sol[rows]) + choose(
            overlapped[rows], ": a kernel's fixed cost, not its work, sets the time, so "
            "efficiency is no reading; give each launch more work (batch, fuse)",
            ": launches, not the kernel, set the time, so efficiency is no reading; re-time "
            "with graph replay or kernel durations, or fuse or graph-capture the call"))
    rows = anomaly & ~impossible
    if rows.any():
        bound = np.where(memory[rows], "", roof.filter(pl.Series(rows)).to_numpy())
        ceilings = {"": c["memory_ceiling"], **c["ceilings"]}
        looked = pl.Series(bound)
        theory = looked.replace_strict({k: v[1] for k, v in ceilings.items()},
                                       return_dtype=pl.Float64).to_numpy()
        done = np.where(memory[rows], nbytes[rows], flops[rows])
        say(rows, percent(envelope_efficiency[rows]) + " of the envelope ceiling: above 105% "
            "yet below theoretical, so bytes, FLOPs or timer are wrong, or the profile is "
            "calibrated below this card (implies " + fixed(done / time_s[rows] / theory, 4)
            + " of " + looked.replace_strict({k: v[0] for k, v in ceilings.items()})
            + " theoretical, profile "
            + looked.replace_strict({k: v[2] for k, v in ceilings.items()})
            + "): recount, or run `roofwise calibrate`")
    rows = reading
    beside = pl.repeat("", int(rows.sum()), dtype=pl.String, eager=True)
    shown = (share & ~split)[rows]
    if shown.any():
        at = np.flatnonzero(shown)
        picked = np.flatnonzero(rows)[at]
        beside = beside.scatter(at, ", " + percent(net[picked]) + " net of "
                                + floor_name(picked) + ", "
                                + percent(floor[picked] / time_s[picked]) + " of the time")
    bound_on = pl.select(pl.when(pl.Series(memory[rows]))
                         .then(pl.lit(f"memory-bound on {c['memory']} {c['mix']} mix"))
                         .otherwise("compute-bound on " + roof.filter(pl.Series(rows)))
                         ).to_series()
    say(rows, percent(efficiency[rows]) + " of SOL" + beside + "; " + bound_on)
    rows = split
    say(rows, "SOL " + seconds(sol[rows]) + " is under " + floor_name(rows) + ", yet the "
        + seconds(time_s[rows]) + " measured is that floor plus " + seconds(rest[rows])
        + " more" + pl.select(pl.when(pl.Series(share[rows])).then(
            ", " + percent(net[rows]) + " of SOL net of the floor").otherwise(pl.lit(""))
        ).to_series() + choose(
            overlapped[rows], "; the rest is the kernel's own time: profile it",
            "; re-time with kernel durations to tell the kernel's own time from overhead "
            "above the floor"))
    if not c["memory_calibrated"]:
        say(np.ones(n, dtype=bool), f"{c['memory']} bandwidth is the datasheet figure "
            "(uncalibrated)")
    for key, (_, _, _, calibrated, _) in units.items():
        if not calibrated:
            rows = (roof == key).to_numpy() & (flops > 0)
            say(rows, pl.repeat(f"uncalibrated unit(s) priced at the datasheet rate: {key}",
                                int(rows.sum()), eager=True))
    # joined on a character no sentence holds, then split: a list per row (concat_list and
    # drop_nulls over the sentence columns take several times longer)
    reasons = pl.DataFrame(sentences).select(
        pl.concat_str(pl.all(), separator="\x1f", ignore_nulls=True).str.split("\x1f")
        .alias("reasons")).to_series()

    no_reading = impossible | (code == 3) | resident
    return f.with_columns(
        machine=pl.lit(c["name"]), memory_time_s=memory_s, compute_time_s=compute_s,
        compute_serial_time_s=compute_s, sol_time_s=sol,
        bound=choose(memory, "memory", "compute"), binding_unit=roof,
        intensity_flops_per_byte=flops / nbytes, mix=pl.lit(c["mix"]), regime=pl.lit("envelope"),
        efficiency=pl.Series(np.where(no_reading, np.nan, efficiency), nan_to_null=True),
        timing_method=pl.lit("events"), kernels=pl.lit(1, dtype=pl.Int64), floor_s=floor,
        efficiency_net_of_floor=pl.Series(np.where(share & ~no_reading, net, np.nan),
                                          nan_to_null=True),
        pipes=pl.lit(None), serial_sol_time_s=pl.lit(None), efficiency_band=pl.lit(None),
        verdict=verdict, reasons=reasons)


if __name__ == "__main__":
    main()
