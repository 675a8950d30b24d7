"""The roofline chart: records as points against each machine's calibrated and theoretical roofs.

It renders verdicts and prices that `analyze` already computed; nothing here judges a row.
Every artist carries a `gid` (and a label) so tests and tools can find roofs, points and
labels through matplotlib's objects instead of pixels:

- `roof:<machine>:memory:<level>` the envelope memory roof (solid); `...:mix:<mix>` each
  measured access mix (faint); `...:theoretical` the datasheet bandwidth (dashed)
- `roof:<machine>:unit:<key>` one flat roof per compute unit the records use, at its
  effective rate (solid); `...:theoretical` the datasheet peak (dashed)
- `label:<machine>:...` the text beside each roof (moved clear of the points by
  `labels.place_roof_labels`); `ridge:<machine>:<key>` balance points
- `points:<series>:<verdict>` one scatter per run/machine and verdict;
  `annotation:<verdict>:<row>` the callouts on impossible and anomalous rows
- `latency_floor:<machine>` the latency-floor bands (`latency_floor_note:<machine>` the
  "floor 3 us" notes); `note:blank` the blank-row count
- `lost:<row>` the labels of the rows that lose the most time (measured minus SOL)
- `density` the binned cloud when there are too many points to draw one by one

The latency floor, faithfully: whether a row is latency-bound depends on its size (its SOL time
and its measured time against the floor), not on where it sits in this plane, so no single
region of the plane is "below the floor" for every row. The chart therefore shades, for every
row whose SOL time is below its own floor (its timing method and kernel count), a narrow band
at its intensity from `flops / (2 x floor)` (the rate it reaches when the floor is half its
time: a horizontal edge, the floor's rate at that intensity) up to its roof. A point inside its
band took under two floors: launch and scheduling, not the roofs, set its rate, so its distance
from the roof is not inefficiency. A band is a region, not an error bar on a neighbour, and the
axes follow the points and roofs, not the bands.

Each run has its own marker shape for every verdict, so two runs of the same records, or a
point under an impossible one, both stay visible. Beyond `DENSE_POINTS` the cloud is binned
(hexbin, log counts) and only the impossible and anomalous rows are drawn on top.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Annotation, Text

from roofwise.base import fmt, paths
from roofwise.base.errors import InputError
from roofwise.base.text import for_mpl, printable, shown
from roofwise.output.analysis import Analysis
from roofwise.pricing.core import AUTO_MIX
from roofwise.profiles.machine import Machine
from roofwise.records.write import atomic_writer
from roofwise.render.labels import LABEL_GAP, obstacle_boxes, overlap_area, place_roof_labels
from roofwise.verdicts.rules import (
    ANOMALY,
    AT_CEILING,
    BELOW,
    BLANK,
    CACHE_RESIDENT,
    FLOOR_EXPLAINS_SHARE,
    IMPOSSIBLE,
    LATENCY_BOUND,
    VERDICTS,
)

VERDICT_COLOR = {
    "at_ceiling": "#2ca02c", "below": "#f0a202", "latency_bound": "#17a2b8",
    "anomaly": "#d61fd6", "impossible": "#d62728", "cache_resident": "#4c72b0",
}
# Drawn in this order, so the rows that need a person's eyes sit on top.
_DRAW_ORDER = (AT_CEILING, BELOW, LATENCY_BOUND, CACHE_RESIDENT, ANOMALY, IMPOSSIBLE)
_SERIES_MARKERS = ("o", "s", "^", "v", "P", "<", ">", "h", "*", "p")
_MACHINE_COLORS = ("#222222", "#1f4e9e", "#8c564b", "#6a3d9a", "#0b6e4f", "#b15928")
MANY_POINTS = 2000  # above this many points: small translucent rasterized markers
PLOT_RANGE = (1e-100, 1e100)  # intensities and rates outside are counted in the note, not drawn
MAX_CALLOUTS = 10  # per verdict; beyond, the legend count still tells the whole story
LOST_LABELS = 5  # the rows losing the most time (measured - SOL) get a numbered label
DENSE_POINTS = 50_000  # above this many points the cloud is binned, outliers drawn on top
MAX_LOUD_POINTS = 5_000  # impossible or anomalous points drawn on a binned cloud, per run
MAX_FLOOR_BANDS = 2_000  # floor bands drawn at most; the legend says when more rows had one
_BAND_HALF_DECADES = 0.06  # half the width of a floor band, in decades of intensity
SAVE_FORMATS = ("png", "svg", "pdf")
_ENVELOPE_ALPHA = 0.35  # the envelope roof, drawn faint when the verdicts used another ceiling
_FLOOR_COLOR = "#5f6b73"
_FLOOR_NOTES = 3  # at most this many floor spans carry a "floor 20 us" note at the low cap
_FLAT_ROOF_DECADES = 10.0  # the x axis reaches at least this factor right of every ridge


@dataclass(frozen=True)
class _Series:
    """The plotted rows of one (run, machine) pair."""

    label: str
    marker: str
    rows: np.ndarray  # indices into the analysis
    analysis: Analysis


def roofline_figure(analyses: Sequence[tuple[str, Analysis]], title: str | None = None,
                    width_in: float = 11.5, height_in: float = 6.8,
                    label_rows: int = LOST_LABELS) -> Figure:
    """One log-log roofline chart for several runs (each `(label, Analysis)`), roofs per machine;
    the `label_rows` rows that lose the most time are numbered and named."""
    fig = Figure(figsize=(width_in, height_in))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    # fixed margins (not a layout engine), so slopes measured now stay true once drawn
    fig.subplots_adjust(left=0.075, right=0.74, bottom=0.09, top=0.94)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved rate (FLOP/s)")
    ax.grid(True, which="major", alpha=0.25)
    ax.grid(True, which="minor", alpha=0.07)

    machines = _machines(analyses)
    ceilings = {name: _ceilings(analyses, name) for name in machines}
    series = _series(analyses)
    xs, ys = _point_coords(series)
    n_points = int(sum(len(s.rows) for s in series))
    xlim, ylim = _limits(xs, ys, machines, analyses, ceilings)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)

    faint = False
    floors: list[Patch] = []
    for k, (name, machine) in enumerate(machines.items()):
        faint |= _draw_roofs(ax, machine, _used_units(analyses, name, machine),
                             _MACHINE_COLORS[k % len(_MACHINE_COLORS)], xlim, ylim,
                             prefix=len(machines) > 1, ceilings=ceilings[name])
        drawn = _draw_latency_floor(ax, analyses, name, machine)
        if drawn is not None:
            floors.append(drawn)
    counts = _draw_points(ax, series, n_points)
    lost = _label_lost_time(ax, series, label_rows)
    place_roof_labels(ax)  # after the points and callouts it must avoid
    blank = sum(int(np.count_nonzero(a.judged.verdict == BLANK)) for _, a in analyses)
    unplottable = sum(len(a) for _, a in analyses) - blank - n_points
    _draw_note(ax, blank, unplottable)
    _draw_legend(fig, ax, counts, series, machines, faint, floors[:1], lost)
    runs = ", ".join(label for label, _ in analyses)
    on = ", ".join(m.display_name for m in machines.values()) or "no machine"
    ax.set_title(for_mpl(title or f"Roofline: {runs} on {on}"), fontsize=11, loc="left")
    _encodable(fig)
    return fig


def _encodable(fig: Figure) -> None:
    """Every text and SVG id of the figure writable as UTF-8: an op name with a lone surrogate
    (from a JSON escape) must not fail the SVG writer. Mathtext is escaped where data strings
    enter (`text.for_mpl`); this pass escapes what is not printable (`text.printable`), which
    the PDF backend cannot lay out and UTF-8 may not encode, wherever it entered."""
    for artist in fig.findobj():
        gid = artist.get_gid()
        if gid:
            artist.set_gid(printable(gid))
        if isinstance(artist, Text):
            artist.set_text(printable(artist.get_text(), keep="\n"))  # its own line breaks


def check_chart_path(path: str, option: str) -> None:
    """Refuse, before any work, a chart path with a format we cannot write, or that cannot
    be written."""
    if Path(path).suffix.lower().lstrip(".") not in SAVE_FORMATS:
        raise InputError(option, f"expected a path ending in .{', .'.join(SAVE_FORMATS)}, "
                                 f"got {shown(path, 60)}")
    paths.check_output(path, option)


def save_figure(fig: Figure, path: str | Path, dpi: int = 150) -> None:
    """Write the chart atomically; the format follows the extension (png, svg, pdf)."""
    fmt_name = Path(path).suffix.lower().lstrip(".")
    if fmt_name not in SAVE_FORMATS:
        raise InputError(str(path), f"unknown chart format {fmt_name!r}; expected a file "
                                    "ending in .png, .svg or .pdf")
    with atomic_writer(path, "wb") as handle:
        fig.savefig(handle, format=fmt_name, dpi=dpi)


def figure_svg(fig: Figure) -> str:
    """The chart as an `<svg>` element (no XML prolog), for inlining in HTML."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg"):]


# ----------------------------------------------------------------------------- data

def _machines(analyses: Sequence[tuple[str, Analysis]]) -> dict[str, Machine]:
    out: dict[str, Machine] = {}
    for _, analysis in analyses:
        for name, machine in analysis.machines.items():
            out.setdefault(name, machine)
    return out


def _used_units(analyses: Sequence[tuple[str, Analysis]], name: str,
                machine: Machine) -> list[str]:
    """Units the rows priced on `name` use: their roofs and any unit split with work on it."""
    used: set[str] = set()
    for _, analysis in analyses:
        mine = analysis.on_machine(name)
        codes, names = analysis.columns.roof_categories()  # codes: no string sort of 1M roofs
        used.update(str(names[int(c)]) for c in np.unique(codes[mine]))
        for key, ops in analysis.priced.unit_ops.items():
            if np.any(mine & (ops > 0)):
                used.add(key)
    return [k for k in machine.units if k in used]  # profile order, known units only


def _series(analyses: Sequence[tuple[str, Analysis]]) -> list[_Series]:
    pairs: list[tuple[str, str, Analysis, np.ndarray]] = []
    for label, analysis in analyses:
        plotted = analysis.judged.verdict != BLANK
        found = [(name, rows) for name in analysis.machines if len(rows := np.flatnonzero(
            plotted & analysis.on_machine(name)))]
        for name, rows in sorted(found, key=lambda pair: int(pair[1][0])):  # first seen first
            pairs.append((label, name, analysis, rows))
    several_runs = len({p[0] for p in pairs}) > 1
    several_machines = len({p[1] for p in pairs}) > 1
    out = []
    for k, (label, name, analysis, rows) in enumerate(pairs):
        text = for_mpl(f"{label} on {name}" if several_runs and several_machines
                       else name if several_machines else label)
        xs, ys = _coords(analysis, rows)
        keep = rows[_plottable(xs) & _plottable(ys)]
        out.append(_Series(text, _SERIES_MARKERS[k % len(_SERIES_MARKERS)], keep, analysis))
    return out


def _plottable(values: np.ndarray) -> np.ndarray:
    """Values a log axis can show with finite ticks: 1e300 bytes in 1e-300 s would put the
    axis limits (and matplotlib's tick formatter) beyond float range."""
    return np.isfinite(values) & (values >= PLOT_RANGE[0]) & (values <= PLOT_RANGE[1])


def _coords(analysis: Analysis, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cols = analysis.columns
    with np.errstate(divide="ignore", invalid="ignore"):
        x = analysis.priced.intensity_flops_per_byte[rows].astype(float)
        y = cols.flops[rows] / cols.time_s[rows]
    return x, y


def _point_coords(series: Sequence[_Series]) -> tuple[np.ndarray, np.ndarray]:
    parts = [_coords(s.analysis, s.rows) for s in series]
    if not parts:
        return np.zeros(0), np.zeros(0)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _limits(xs: np.ndarray, ys: np.ndarray, machines: Mapping[str, Machine],
            analyses: Sequence[tuple[str, Analysis]], ceilings: Mapping[str, _Ceilings]
            ) -> tuple[tuple[float, float], tuple[float, float]]:
    """Axis limits from the points, the ridges and the roofs, padded in log space."""
    x_vals: list[float] = []  # the roofs' points; the data's are numpy columns
    y_vals: list[float] = []
    for name, machine in machines.items():
        bandwidths = [b for b in (ceilings[name].bandwidth(machine),
                                  machine.dram.effective_bytes_per_s()) if b]
        for key in _used_units(analyses, name, machine):
            unit = machine.units[key]
            for rate in (ceilings[name].rate(machine, key), unit.effective_ops_per_s(),
                         unit.theoretical_ops_per_s):
                if rate:
                    y_vals.append(rate)
                    x_vals.extend(rate / b for b in bandwidths)
                    # a decade of flat roof right of each ridge: room for the roof's label
                    x_vals.extend(rate / b * _FLAT_ROOF_DECADES / 4 for b in bandwidths)
    x_all = np.concatenate([np.asarray(xs, dtype=np.float64), np.array(x_vals, dtype=float)])
    y_all = np.concatenate([np.asarray(ys, dtype=np.float64), np.array(y_vals, dtype=float)])
    x_arr = x_all[(x_all > 0) & np.isfinite(x_all)]
    y_arr = y_all[(y_all > 0) & np.isfinite(y_all)]
    x_arr = x_arr if len(x_arr) else np.array([1.0])
    y_arr = y_arr if len(y_arr) else np.array([1e12])
    x_lo, x_hi = float(x_arr.min()) / 4, float(x_arr.max()) * 4
    y_lo, y_hi = float(y_arr.min()) / 4, float(y_arr.max()) * 3
    return (x_lo, x_hi), (y_lo, y_hi)


# ----------------------------------------------------------------------------- roofs

@dataclass(frozen=True)
class _Ceilings:
    """What one machine's roofs are drawn at: the regime and mix the analysis priced with."""

    regime: str | None  # None: each unit's envelope regime
    mix: str | None  # None: the envelope mix; "auto": each row its own mix

    def bandwidth(self, machine: Machine) -> float | None:
        """The bandwidth of the solid memory roof; under "auto" rows vary, so the envelope."""
        return machine.dram.effective_bytes_per_s(None if self.mix == AUTO_MIX else self.mix)

    def rate(self, machine: Machine, key: str) -> float | None:
        return machine.units[key].effective_ops_per_s(self.regime)

    def mix_text(self, machine: Machine) -> str:
        level = machine.dram
        if not level.calibration_by_mix:
            return "uncalibrated"
        if self.mix is None:
            return f"{level.envelope_mix}, envelope"
        if self.mix == AUTO_MIX:
            return f"{level.envelope_mix} envelope; auto: each row at its own mix"
        return f"{self.mix} mix"

    def regime_text(self, machine: Machine, key: str) -> str:
        unit = machine.units[key]
        if not unit.calibrated:
            return "uncalibrated"
        if self.regime is None:
            return f"{unit.envelope_regime}, envelope"
        if self.regime in unit.calibration_by_regime:
            return self.regime
        return f"{unit.envelope_regime}; no {self.regime} measured"  # pricing reads it so too


def _ceilings(analyses: Sequence[tuple[str, Analysis]], name: str) -> _Ceilings:
    """The regime and mix of the runs priced on `name`; runs that disagree cannot share roofs."""
    found = {(a.regime, a.mix) for _, a in analyses if name in a.machines}
    if len(found) > 1:
        shown = ", ".join(f"regime {r or 'envelope'} / mix {m or 'envelope'}"
                          for r, m in sorted(found, key=str))
        raise InputError("runs", f"priced at different ceilings on {name} ({shown}); expected "
                                 "one regime and mix per machine on one chart")
    regime, mix = next(iter(found), (None, None))
    return _Ceilings(regime, mix)


def _draw_roofs(ax: Axes, machine: Machine, units: Sequence[str], color: str,
                xlim: tuple[float, float], ylim: tuple[float, float], prefix: bool,
                ceilings: _Ceilings) -> bool:
    """Draw the roofs at the analysis's ceilings, the envelope faint where it differs.

    Returns whether any faint envelope roof was drawn (the legend then explains it).
    """
    tag = f"{machine.name}: " if prefix else ""
    level = machine.dram
    bandwidth = ceilings.bandwidth(machine)
    envelope_bw = level.effective_bytes_per_s()
    theory_bw = level.theoretical_bytes_per_s
    rates = {k: ceilings.rate(machine, k) for k in units}
    envelope_rates = {k: machine.units[k].effective_ops_per_s() for k in units}
    top = max((r for r in [*rates.values(), *envelope_rates.values()] if r),
              default=ylim[1])
    x_lo, x_hi = xlim
    base = f"roof:{machine.name}:memory:{level.name}"
    faint = False
    if bandwidth:
        # the roof the verdicts used, up to where it meets the highest calibrated roof
        x_end = min(x_hi, top / bandwidth)
        ax.plot([x_lo, x_end], [bandwidth * x_lo, bandwidth * x_end], color=color, lw=2.2,
                gid=base, label=f"{level.name} {ceilings.mix_text(machine)}", zorder=3)
        _roof_text(ax, x_lo * 1.6, bandwidth * x_lo * 2.6,
                   f"{tag}{level.name} {fmt.rate(bandwidth, 'B/s', 2)} "
                   f"({ceilings.mix_text(machine)})", color,
                   gid=f"label:{machine.name}:memory:{level.name}", slope=True)
        if envelope_bw and envelope_bw != bandwidth:
            faint = True
            ax.plot([x_lo, min(x_hi, top / envelope_bw)],
                    [envelope_bw * x_lo, min(top, envelope_bw * x_hi)], color=color, lw=1.2,
                    alpha=_ENVELOPE_ALPHA, gid=f"{base}:envelope", zorder=2,
                    label=f"{level.name} envelope ({level.envelope_mix}) "
                          f"{fmt.rate(envelope_bw, 'B/s', 2)}")
        drawn = {bandwidth, envelope_bw}
        for mix in level.calibration_by_mix:
            mix_bw = level.effective_bytes_per_s(mix) or 0.0
            if mix_bw in drawn or not mix_bw:
                continue
            ax.plot([x_lo, min(x_hi, top / mix_bw)], [mix_bw * x_lo, min(top, mix_bw * x_hi)],
                    color=color, lw=0.9, alpha=0.3, gid=f"{base}:mix:{mix}",
                    label=f"{level.name} {mix} mix {fmt.rate(mix_bw, 'B/s', 2)}", zorder=2)
    if theory_bw and theory_bw != bandwidth:
        theory_top = max((machine.units[k].theoretical_ops_per_s or 0.0 for k in units),
                         default=0.0) or ylim[1]
        x_end = min(x_hi, theory_top / theory_bw)
        ax.plot([x_lo, x_end], [theory_bw * x_lo, theory_bw * x_end], color=color, lw=1.0,
                ls="--", alpha=0.6, gid=f"{base}:theoretical",
                label=f"{level.name} theoretical {fmt.rate(theory_bw, 'B/s', 2)}", zorder=2)

    for key in units:
        unit = machine.units[key]
        rate = rates[key]
        op_unit = f"{fmt.op_name(key)}/s"
        if rate:
            x_start = max(x_lo, rate / bandwidth) if bandwidth else x_lo
            ax.plot([x_start, x_hi], [rate, rate], color=color, lw=1.8,
                    gid=f"roof:{machine.name}:unit:{key}",
                    label=f"{key} {ceilings.regime_text(machine, key)}", zorder=3)
            text = f"{tag}{key} {fmt.rate(rate, op_unit)} ({ceilings.regime_text(machine, key)})"
            _roof_text(ax, x_start * LABEL_GAP, rate / LABEL_GAP, text, color,
                       gid=f"label:{machine.name}:unit:{key}", va="top")
            if bandwidth and x_lo < rate / bandwidth < x_hi:
                ridge = rate / bandwidth
                ax.plot([ridge], [rate], marker="o", ms=5, color=color, mfc="white", ls="none",
                        gid=f"ridge:{machine.name}:{key}", label=f"{key} balance point",
                        zorder=4)
                ax.annotate(f"{ridge:.3g} FLOP/B", (ridge, rate), textcoords="offset points",
                            xytext=(-6, 2), ha="right", va="bottom", fontsize=7, color=color,
                            gid=f"label:{machine.name}:ridge:{key}")
        envelope = envelope_rates[key]
        if envelope and rate and envelope != rate:
            faint = True
            x_start = max(x_lo, envelope / envelope_bw) if envelope_bw else x_lo
            ax.plot([x_start, x_hi], [envelope, envelope], color=color, lw=1.2,
                    alpha=_ENVELOPE_ALPHA, gid=f"roof:{machine.name}:unit:{key}:envelope",
                    label=f"{key} envelope ({unit.envelope_regime}) "
                          f"{fmt.rate(envelope, op_unit)}", zorder=2)
        theory = unit.theoretical_ops_per_s
        if theory and theory != rate:
            x_start = max(x_lo, theory / theory_bw) if theory_bw else x_lo
            ax.plot([x_start, x_hi], [theory, theory], color=color, lw=1.0, ls="--", alpha=0.6,
                    gid=f"roof:{machine.name}:unit:{key}:theoretical",
                    label=f"{key} theoretical", zorder=2)
            _roof_text(ax, x_start * LABEL_GAP, theory * LABEL_GAP,
                       f"{tag}{key} theoretical {fmt.rate(theory, op_unit)}", color,
                       gid=f"label:{machine.name}:unit:{key}:theoretical",
                       va="bottom", alpha=0.7)
    return faint


def _roof_text(ax: Axes, x: float, y: float, text: str, color: str, gid: str,
               align: str = "left", va: str = "bottom", alpha: float = 1.0,
               slope: bool = False) -> None:
    text = for_mpl(text)  # profile names are data too
    artist = ax.text(x, y, text, color=color, fontsize=7.5, ha=align, va=va, alpha=alpha,
                     gid=gid, zorder=5, clip_on=True, rotation_mode="anchor",
                     rotation=_screen_slope_degrees(ax) if slope else 0.0)
    artist.set_label(text)


def _screen_slope_degrees(ax: Axes) -> float:
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    bbox = ax.get_position()
    fig_w, fig_h = ax.get_figure(root=True).get_size_inches()  # type: ignore[union-attr]
    dx = bbox.width * fig_w / math.log10(x1 / x0)
    dy = bbox.height * fig_h / math.log10(y1 / y0)
    return math.degrees(math.atan2(dy, dx))


def _floor_spans(analyses: Sequence[tuple[str, Analysis]], name: str,
                 machine: Machine) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(AI, flops/floor, roof rate at the AI, floor) for rows whose SOL is below their own floor
    (the floor of each row's timing method and kernel count)."""
    parts = []
    for _, analysis in analyses:
        floor_s = analysis.judged.floor_s
        if floor_s is None:
            continue
        rows = np.flatnonzero(analysis.on_machine(name)
                              & (analysis.judged.verdict != BLANK)
                              & (analysis.priced.sol_time_s < floor_s))
        if not len(rows):
            continue
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x = analysis.priced.intensity_flops_per_byte[rows].astype(float)
            flops = analysis.columns.flops[rows].astype(float)
            # the floor explains a time up to 1 / FLOOR_EXPLAINS_SHARE of it
            low = flops * FLOOR_EXPLAINS_SHARE / floor_s[rows]
            high = flops / analysis.priced.sol_time_s[rows]  # the row's own roof at its AI
        keep = (np.isfinite(x) & np.isfinite(low) & np.isfinite(high) & (x > 0) & (low > 0)
                & (high > low))
        parts.append((x[keep], low[keep], high[keep], floor_s[rows][keep]))
    if not parts:
        return np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0)
    x, low, high, floors = (np.concatenate([p[k] for p in parts]) for k in range(4))
    return x, low, high, floors


def _draw_latency_floor(ax: Axes, analyses: Sequence[tuple[str, Analysis]], name: str,
                        machine: Machine) -> Patch | None:
    """A shaded band per row whose SOL is below its floor: at its intensity, from the rate it
    reaches when the floor is half its time up to its roof. A point inside took under two
    floors: no traction. Returns the legend patch, or None when no row has one."""
    x, low, high, floors = _floor_spans(analyses, name, machine)
    if not len(x):
        return None
    total = len(x)
    if total > MAX_FLOOR_BANDS:  # an even sample across the rows, said in the legend
        pick = np.linspace(0, total - 1, MAX_FLOOR_BANDS).astype(np.int64)
        x, low, high, floors = x[pick], low[pick], high[pick], floors[pick]
    half = 10.0 ** _BAND_HALF_DECADES
    left, right = x / half, x * half
    boxes = np.stack([np.stack([left, low], 1), np.stack([right, low], 1),
                      np.stack([right, high], 1), np.stack([left, high], 1)], 1)
    bands = PolyCollection(list(boxes), facecolors=_FLOOR_COLOR, edgecolors="none",
                           alpha=0.18, zorder=1, gid=f"latency_floor:{machine.name}",
                           rasterized=len(x) > MANY_POINTS)
    ax.add_collection(bands, autolim=False)  # the axes follow the data, not the bands
    edge = ax.hlines(low, left, right, colors=_FLOOR_COLOR, lw=1.2, alpha=0.7, zorder=1,
                     gid=f"latency_floor:{machine.name}:rate")
    edge.set_rasterized(len(x) > MANY_POINTS)
    assumed = ", assumed" if machine.latency_floors.assumed else ""
    sampled = f" ({len(x):,} of {total:,} rows shown)" if total > len(x) else ""
    if len(x) <= _FLOOR_NOTES:
        for xi, lo, fl in zip(x, low, floors, strict=True):
            ax.annotate(f"floor {fmt.seconds(fl, 0)}", (xi * half, lo),
                        textcoords="offset points", xytext=(4, 0), ha="left", va="center",
                        fontsize=7, color=_FLOOR_COLOR, zorder=4, annotation_clip=True,
                        gid=f"latency_floor_note:{machine.name}")
    return Patch(facecolor=_FLOOR_COLOR, alpha=0.3, edgecolor=_FLOOR_COLOR,
                 label=f"latency floor (per row's timing{assumed}){sampled}:\n"
                       "a point in its band took under 2 floors;\nno traction")


# ----------------------------------------------------------------------------- points

def _draw_points(ax: Axes, series: Sequence[_Series], n_points: int) -> dict[str, int]:
    """One scatter per run and verdict, the run's own marker for every verdict (loud verdicts
    larger, with a black edge, on top). Beyond DENSE_POINTS, a binned cloud and the loud rows."""
    many = n_points > MANY_POINTS
    dense = n_points > DENSE_POINTS
    counts = {name: 0 for name in VERDICTS}
    callouts = {IMPOSSIBLE: 0, ANOMALY: 0}
    if dense:
        xs, ys = _point_coords(series)
        ax.hexbin(xs, ys, xscale="log", yscale="log", gridsize=90, bins="log", mincnt=1,
                  cmap="Greys", linewidths=0, zorder=5, gid="density",
                  extent=tuple(np.log10([*ax.get_xlim(), *ax.get_ylim()])))
    for k, s in enumerate(series):
        hollow = k > 0  # a later run's markers are outlines: the run beneath stays visible
        verdicts = s.analysis.judged.verdict[s.rows]
        for code in _DRAW_ORDER:
            rows = s.rows[verdicts == code]
            if not len(rows):
                continue
            name = VERDICTS[code]
            counts[name] += len(rows)
            loud = code in (IMPOSSIBLE, ANOMALY)
            if dense and not loud:
                continue  # in the binned cloud
            if dense and len(rows) > MAX_LOUD_POINTS:  # an even sample; the legend counts all
                rows = rows[np.linspace(0, len(rows) - 1, MAX_LOUD_POINTS).astype(np.int64)]
            x, y = _coords(s.analysis, rows)
            size = (150 if code == IMPOSSIBLE else 80) if loud else (9 if many else 42)
            color = VERDICT_COLOR[name]
            edge = color if hollow else ("black" if loud else ("none" if many else "white"))
            ax.scatter(x, y, s=size * (1.5 if hollow else 1.0), marker=s.marker,
                       facecolors="none" if hollow else color, edgecolors=edge,
                       alpha=0.9 if loud else (0.35 if many else 0.85),
                       linewidths=(2.0 if loud else 1.3) if hollow else (1.3 if loud else 0.5),
                       zorder=7 if loud else 6, rasterized=many,
                       gid=f"points:{s.label}:{name}", label=f"{s.label}: {name}")
            if loud:
                for i, xi, yi in zip(rows, x, y, strict=True):
                    if callouts[code] >= MAX_CALLOUTS:
                        break
                    callouts[code] += 1
                    right = _axes_fraction(ax, xi) > 0.6  # call out leftwards near the edge
                    ax.annotate(f"{name.upper()}: {for_mpl(s.analysis.columns.op[i])}", (xi, yi),
                                textcoords="offset points",
                                xytext=(-10 if right else 10, 16 if code == IMPOSSIBLE else -26),
                                ha="right" if right else "left", fontsize=8,
                                fontweight="bold", color=VERDICT_COLOR[name], zorder=8,
                                gid=f"annotation:{name}:{int(i)}",
                                bbox={"boxstyle": "round,pad=0.2", "fc": "white",
                                      "ec": VERDICT_COLOR[name], "alpha": 0.85})
    return counts


def lost_time_s(analysis: Analysis, rows: np.ndarray) -> np.ndarray:
    """Seconds each row loses against its speed of light (measured - SOL); NaN where the row
    was not priced, and never a reading for impossible rows (their time is wrong)."""
    lost = analysis.columns.time_s[rows] - analysis.priced.sol_time_s[rows]
    readable = analysis.judged.verdict[rows] != IMPOSSIBLE
    return np.where(readable, lost, np.nan)


def _label_lost_time(ax: Axes, series: Sequence[_Series], n: int) -> list[str]:
    """Number the `n` rows that lose the most time, across every run (the ones a person should
    look at first, whatever their verdict), beside their points; returns the key's lines
    (number, op, workload, time lost) for the legend, where they never cover a point."""
    if n <= 0:
        return []
    candidates = [(s, s.rows, lost_time_s(s.analysis, s.rows)) for s in series if len(s.rows)]
    if not candidates:
        return []
    lost = np.concatenate([c[2] for c in candidates])
    owner = np.concatenate([np.full(len(c[1]), k) for k, c in enumerate(candidates)])
    index = np.concatenate([c[1] for c in candidates])
    finite = np.flatnonzero(np.isfinite(lost) & (lost > 0))
    if not len(finite):
        return []
    top = finite[np.argsort(-lost[finite], kind="stable")[:n]]
    key: list[str] = []
    badges: list[Annotation] = []
    for rank, k in enumerate(top, 1):
        s = candidates[int(owner[k])][0]
        i = int(index[k])
        (x,), (y,) = _coords(s.analysis, np.array([i]))
        workload = fmt.workload(s.analysis.columns.field_values("workload", np.array([i]))[0])
        short = workload if len(workload) <= 34 else workload[:33] + "…"
        key.append(for_mpl(f"{rank}. {s.analysis.columns.op[i]}, lost "
                           f"{fmt.seconds(float(lost[k]), significant=3)}")
                   + (f"\n    {for_mpl(short)}" if short else ""))
        badges.append(ax.annotate(
            str(rank), (x, y), textcoords="offset points", xytext=BADGE_OFFSETS_PT[0],
            ha="center", va="center", fontsize=8, fontweight="bold", color="#222222", zorder=8,
            gid=f"lost:{i}", bbox={"boxstyle": "circle,pad=0.12", "fc": "white",
                                   "ec": "#555555", "lw": 0.6, "alpha": 0.9}))
        ax.texts[-1].set_label(key[-1])  # the whole line, for tools reading the figure
    _place_badges(ax, badges)
    return key


# where a number may sit around its point, in points from the point's centre, best first
BADGE_OFFSETS_PT = ((10, 7), (10, -7), (-10, 7), (-10, -7), (0, 12), (0, -12), (17, 0),
                    (-17, 0), (20, 14), (-20, 14), (20, -14), (-20, -14))


def _place_badges(ax: Axes, badges: Sequence[Annotation]) -> None:
    """Move each number to the first spot around its point that covers no other point, no
    callout and no number already placed (its own point excepted), inside the axes; where
    none is free, to the spot that covers least. So a number never hides the point of
    another row it might be read as."""
    if not badges:
        return
    canvas = ax.get_figure(root=True).canvas  # type: ignore[union-attr]
    renderer = canvas.get_renderer()  # type: ignore[union-attr]
    obstacles = obstacle_boxes(ax, renderer)
    points = obstacles[:0]
    frame = ax.get_window_extent(renderer)
    for badge in badges:
        centre = ax.transData.transform(np.array([badge.xy], dtype=np.float64))[0]
        own = ((obstacles[:, 0] <= centre[0]) & (centre[0] <= obstacles[:, 2])
               & (obstacles[:, 1] <= centre[1]) & (centre[1] <= obstacles[:, 3]))
        avoid = np.vstack([obstacles[~own], points])
        best: tuple[float, tuple[int, int]] | None = None
        for offset in BADGE_OFFSETS_PT:
            badge.xyann = offset
            box = badge.get_window_extent(renderer)
            if box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1:
                continue
            covered = overlap_area(np.array([box.x0, box.y0, box.x1, box.y1]), avoid)
            if best is None or covered < best[0]:
                best = (covered, offset)
            if covered == 0.0:
                break
        badge.xyann = best[1] if best is not None else BADGE_OFFSETS_PT[0]
        box = badge.get_window_extent(renderer)
        points = np.vstack([points, [[box.x0, box.y0, box.x1, box.y1]]])


def _axes_fraction(ax: Axes, x: float) -> float:
    """Where `x` sits across the (log) x axis, 0 at the left edge and 1 at the right."""
    x0, x1 = ax.get_xlim()
    return math.log(x / x0) / math.log(x1 / x0)


def _draw_note(ax: Axes, blank: int, unplottable: int) -> None:
    parts = []
    if blank:
        parts.append(f"{blank} blank row{'s' if blank != 1 else ''} not plotted (the model "
                     f"cannot price {'them' if blank != 1 else 'it'}; see `roofwise analyze`)")
    if unplottable:
        parts.append(f"{unplottable} row{'s' if unplottable != 1 else ''} with no finite "
                     "intensity or rate (or one beyond 1e±100) not plotted")
    if parts:
        ax.text(0.01, 0.01, "; ".join(parts), transform=ax.transAxes, fontsize=8,
                color="#555555", ha="left", va="bottom", gid="note:blank", zorder=9)


def _draw_legend(fig: Figure, ax: Axes, counts: Mapping[str, int],
                 series: Sequence[_Series], machines: Mapping[str, Machine],
                 faint_envelope: bool = False,
                 floors: Sequence[Patch] = (), lost: Sequence[str] = ()) -> None:
    handles: list[object] = []
    for name in ("impossible", "anomaly", "below", "latency_bound", "cache_resident",
                 "at_ceiling"):
        if counts.get(name):
            loud = name in ("impossible", "anomaly")
            handles.append(Line2D([], [], ls="none", marker="o", ms=9 if loud else 6,
                                  color=VERDICT_COLOR[name], mec="black" if loud else "white",
                                  mew=1.3 if loud else 0.5,
                                  label=f"{name} ({counts[name]:,})"))
    if len(series) > 1:
        for k, s in enumerate(series):
            handles.append(Line2D([], [], ls="none", marker=s.marker, color="#777777",
                                  mfc="none" if k else "#777777", label=s.label))
    for k, machine in enumerate(machines.values()):
        color = _MACHINE_COLORS[k % len(_MACHINE_COLORS)]
        who = f"{for_mpl(machine.name)} " if len(machines) > 1 else ""
        handles.append(Line2D([], [], color=color, lw=2, label=f"{who}calibrated roof "
                                                                "(verdicts' ceiling)"))
        handles.append(Line2D([], [], color=color, lw=1, ls="--", alpha=0.6,
                              label=f"{who}theoretical peak"))
        if faint_envelope:
            handles.append(Line2D([], [], color=color, lw=1.2, alpha=_ENVELOPE_ALPHA,
                                  label=f"{who}envelope (not the verdicts' ceiling)"))
        if machine.dram.calibration_by_mix:
            handles.append(Line2D([], [], color=color, lw=0.9, alpha=0.3,
                                  label=f"{who}other access mixes"))
    handles.extend(floors)  # drawn as on the chart: a shaded band
    if lost:
        handles.append(Line2D([], [], ls="none", label="most time lost (measured - SOL):"))
        handles.extend(Line2D([], [], ls="none", label=line) for line in lost)
    legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                       fontsize=8, frameon=False, borderaxespad=0)
    legend.set_gid("legend")
