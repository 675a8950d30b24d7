"""The roofline chart, inspected through matplotlib's artists (never pixels)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_hex
from matplotlib.transforms import Affine2D, Bbox

from roofwise.base.errors import InputError
from roofwise.output.analysis import Analysis, analyze
from roofwise.profiles.load import builtin_machines
from roofwise.records.read import columns_from_valid
from roofwise.render.chart import VERDICT_COLOR, roofline_figure, save_figure

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "records.jsonl"

H200 = builtin_machines()["h200"]


def _by_gid(fig, gid):
    ax = fig.axes[0]
    found = [a for a in [*ax.lines, *ax.collections, *ax.texts] if a.get_gid() == gid]
    assert found, f"no artist with gid {gid!r}"
    return found[0]


def _points(fig):
    """verdict -> number of plotted points, from the scatter artists."""
    out: dict[str, int] = {}
    for c in fig.axes[0].collections:
        gid = c.get_gid() or ""
        if isinstance(c, PathCollection) and gid.startswith("points:"):
            out[gid.rsplit(":", 1)[1]] = out.get(gid.rsplit(":", 1)[1], 0) + len(c.get_offsets())
    return out


@pytest.mark.parametrize("suffix", ["png", "svg", "pdf"])
def test_saves_each_format(example_analysis: Analysis, tmp_path, suffix):
    path = tmp_path / f"chart.{suffix}"
    save_figure(roofline_figure([("examples", example_analysis)]), path)
    head = path.read_bytes()[:64]
    magic = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}[suffix]
    assert head.startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [f"chart.{suffix}"]  # no temp file left


def test_unknown_format_is_input_error(example_analysis, tmp_path):
    with pytest.raises(InputError, match=r"\.png, \.svg or \.pdf"):
        save_figure(roofline_figure([("x", example_analysis)]), tmp_path / "c.gif")
    assert not list(tmp_path.iterdir())


def test_memory_roof_is_the_envelope_with_slope_one(example_analysis):
    fig = roofline_figure([("examples", example_analysis)])
    line = _by_gid(fig, "roof:h200:memory:hbm")
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    # envelope = read mix: 4.8e12 * 0.9380 B/s; y = bandwidth * AI
    assert np.allclose(y / x, 4.8e12 * 0.9380)
    slope = np.diff(np.log10(y)) / np.diff(np.log10(x))
    assert np.allclose(slope, 1.0)
    # every other measured mix drawn faintly, at its own bandwidth
    for mix, frac in (("copy", 0.8183), ("triad", 0.8427), ("write", 0.8926)):
        faint = _by_gid(fig, f"roof:h200:memory:hbm:mix:{mix}")
        assert faint.get_alpha() < 0.5
        assert np.isclose(faint.get_ydata()[0] / faint.get_xdata()[0], 4.8e12 * frac)
    theory = _by_gid(fig, "roof:h200:memory:hbm:theoretical")
    assert theory.get_linestyle() == "--"
    assert np.isclose(theory.get_ydata()[0] / theory.get_xdata()[0], 4.8e12)


def test_one_flat_roof_per_used_unit_at_its_effective_rate(example_analysis):
    fig = roofline_figure([("examples", example_analysis)])
    unit_lines = {line.get_gid() for line in fig.axes[0].lines
                  if (line.get_gid() or "").startswith("roof:h200:unit:")}
    # the records use cuda_core.fp32 and tensor_core.bf16 only: no sfu, fp16, fp8, tf32 roofs
    assert unit_lines == {"roof:h200:unit:cuda_core.fp32", "roof:h200:unit:tensor_core.bf16",
                          "roof:h200:unit:cuda_core.fp32:theoretical",
                          "roof:h200:unit:tensor_core.bf16:theoretical"}
    expected = {"cuda_core.fp32": (67.0e12 * 0.8548, 67.0e12, "sustained"),
                "tensor_core.bf16": (989.5e12 * 0.7680, 989.5e12, "burst")}
    for key, (effective, theory, regime) in expected.items():
        flat = _by_gid(fig, f"roof:h200:unit:{key}")
        assert np.allclose(flat.get_ydata(), effective)
        assert flat.get_linestyle() == "-"
        dashed = _by_gid(fig, f"roof:h200:unit:{key}:theoretical")
        assert np.allclose(dashed.get_ydata(), theory)
        assert dashed.get_linestyle() == "--"
        assert dashed.get_ydata()[0] > flat.get_ydata()[0]
        label = _by_gid(fig, f"label:h200:unit:{key}").get_text()
        assert key in label and regime in label
        ridge = _by_gid(fig, f"ridge:h200:{key}")
        assert np.isclose(ridge.get_xdata()[0], effective / (4.8e12 * 0.9380))
    assert "57.3 TFLOP/s" in _by_gid(fig, "label:h200:unit:cuda_core.fp32").get_text()
    assert "759.9 TFLOP/s" in _by_gid(fig, "label:h200:unit:tensor_core.bf16").get_text()
    assert "4.50 TB/s" in _by_gid(fig, "label:h200:memory:hbm").get_text()


def test_points_coloured_by_verdict_and_blank_counted(example_analysis):
    counts = example_analysis.counts()
    fig = roofline_figure([("examples", example_analysis)])
    assert _points(fig) == {k: v for k, v in counts.items() if v and k != "blank"}
    assert _points(fig) == {"at_ceiling": 1, "below": 2, "anomaly": 1, "latency_bound": 1,
                            "impossible": 1, "cache_resident": 1}
    for c in fig.axes[0].collections:
        gid = c.get_gid() or ""
        if gid.startswith("points:"):
            verdict = gid.rsplit(":", 1)[1]
            assert {to_hex(f) for f in c.get_facecolors()} == {VERDICT_COLOR[verdict]}
    impossible = _by_gid(fig, "points:examples:impossible")
    below = _by_gid(fig, "points:examples:below")
    assert impossible.get_sizes()[0] > 2 * below.get_sizes()[0]
    callouts = [t.get_text() for t in fig.axes[0].texts
                if (t.get_gid() or "").startswith("annotation:impossible")]
    assert sorted(callouts) == ["IMPOSSIBLE: gemm_bf16"]
    assert "1 blank row not plotted" in _by_gid(fig, "note:blank").get_text()
    # point coordinates: the at_ceiling row is the fused qk op at 17.5 us
    ok = _by_gid(fig, "points:examples:at_ceiling").get_offsets()[0]
    assert np.allclose(ok, (189235200 / 67764736, 189235200 / 1.75e-05))


def test_latency_floor_is_a_shaded_band_from_the_floor_rate_to_the_roof(example_analysis):
    fig = roofline_figure([("examples", example_analysis)])
    band = _by_gid(fig, "latency_floor:h200")
    assert isinstance(band, PolyCollection)
    (box,) = band.get_paths()  # only the decode step has SOL below its floor
    xs, ys = box.vertices[:, 0], box.vertices[:, 1]
    ai = 46200 / 17056
    # a band around the row's intensity (a region, not a line on a neighbour's point)
    assert np.isclose(np.sqrt(xs.min() * xs.max()), ai) and xs.max() / xs.min() < 1.5
    # its 4 us is under the 20 us events floor, so its floor is the kernel one, 3 us; the band
    # starts at the floor's rate where the floor is half the time, a horizontal edge
    lo, hi = ys.min(), ys.max()
    assert np.isclose(lo, 46200 / (2 * 3e-6))
    assert np.isclose(hi, 4.8e12 * 0.9380 * ai)  # its memory roof
    edge = _by_gid(fig, "latency_floor:h200:rate")
    ((x0, y0), (x1, y1)), = edge.get_segments()
    assert y0 == y1 == pytest.approx(lo) and x0 < ai < x1
    decode = _by_gid(fig, "points:examples:latency_bound").get_offsets()[0]
    assert lo < decode[1] < hi and np.isclose(decode[0], ai)
    assert _by_gid(fig, "latency_floor_note:h200").get_text() == "floor 3 us"
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert ("latency floor (per row's timing, assumed):\na point in its band took under 2 "
            "floors;\nno traction" in legend)


def test_axes_follow_the_points_and_roofs_not_the_floor(example_analysis):
    fig = roofline_figure([("examples", example_analysis)])
    y0, _ = fig.axes[0].get_ylim()
    rates = [o[1] for c in fig.axes[0].collections if (c.get_gid() or "").startswith("points:")
             for o in c.get_offsets()]
    # the lowest point (the decode step, 46200 FLOP in 4 us = 1.155e10 FLOP/s) sets the floor
    # of the axis, padded 4x; the band's low edge (7.7e9) no longer drags it down
    assert min(rates) == pytest.approx(46200 / 4e-6)
    assert y0 == pytest.approx(min(rates) / 4)


def test_rows_losing_the_most_time_are_numbered_and_named(example_analysis):
    fig = roofline_figure([("examples", example_analysis)], label_rows=3)
    marks = [t for t in fig.axes[0].texts if (t.get_gid() or "").startswith("lost:")]
    assert sorted(t.get_text() for t in marks) == ["1", "2", "3"]  # numbers beside points
    labels = sorted((t.get_label() for t in marks), key=lambda t: t[:2])
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "most time lost (measured - SOL):" in legend and all(x in legend for x in labels)
    # measured - SOL, impossible rows excluded: the rmsnorm (112 - 59.6 us), the GEMM anomaly
    # is faster than its SOL (no loss), the split qk op (60 - 33.7 us)
    assert len(labels) == 3
    assert labels[0] == "1. rmsnorm, lost 52.4 us\n    tokens=16384 hidden=4096"  # 112 - 59.6
    assert labels[1].startswith("2. qk_norm_rope_quant, lost 26.3 us\n    tokens=4096 note=")
    assert labels[2] == '3. qk_norm_rope_quant, lost 4.00 us\n    tokens=1 note="decode step"'


def test_dense_clouds_are_binned_with_the_outliers_on_top():
    analysis = _synthetic(60_000)
    fig = roofline_figure([("big", analysis)])
    gids = {c.get_gid() for c in fig.axes[0].collections}
    assert "density" in gids
    drawn = [g for g in gids if g and g.startswith("points:")]
    assert all(g.endswith((":impossible", ":anomaly")) for g in drawn)
    legend = " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    counts = analysis.counts()
    for name, n in counts.items():
        if n and name != "blank":
            assert f"{name} ({n:,})" in legend  # every row counted, drawn or binned


def test_no_latency_floor_span_without_a_row_below_it():
    rows = [r for r in EXAMPLE_ROWS if r["workload"].get("note") != "decode step"]
    fig = roofline_figure([("x", analyze(columns_from_valid(rows), builtin_machines()))])
    gids = {a.get_gid() or "" for a in [*fig.axes[0].lines, *fig.axes[0].collections]}
    assert not any(g.startswith("latency_floor") for g in gids)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert not any("latency floor" in t for t in legend)


def test_roof_labels_stay_inside_the_axes_when_only_cuda_cores_are_drawn():
    """The ridge near the right edge once clipped '…57.3 TFLOP/s (sustaine'."""
    rows = [{"op": "a", "flops": 1.25e9, "bytes": 1e9, "roof": "cuda_core.fp32",
             "time_s": 4e-4, "device": "NVIDIA H200", "timing": "device"},
            {"op": "b", "flops": 2.8e9, "bytes": 1e9, "roof": "cuda_core.fp32",
             "time_s": 2.6e-4, "device": "NVIDIA H200", "timing": "device"}]
    fig = roofline_figure([("fp32", analyze(columns_from_valid(rows), builtin_machines()))])
    renderer = fig.canvas.get_renderer()
    frame = fig.axes[0].get_window_extent(renderer)
    labels = [t for t in fig.axes[0].texts if (t.get_gid() or "").startswith("label:")]
    assert {t.get_gid() for t in labels} >= {"label:h200:unit:cuda_core.fp32",
                                             "label:h200:unit:cuda_core.fp32:theoretical"}
    for text in labels:
        box = text.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, text.get_text()
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, text.get_text()
    solid = _by_gid(fig, "label:h200:unit:cuda_core.fp32")
    assert solid.get_text() == "cuda_core.fp32 57.3 TFLOP/s (sustained, envelope)"
    ridge = 67.0e12 * 0.8548 / (4.8e12 * 0.9380)
    assert solid.get_position()[0] > ridge  # on its own roof, right of the ridge
    assert fig.axes[0].get_xlim()[1] >= 10 * ridge * 0.999  # a decade of flat roof


def _synthetic(n: int, seed: int = 0) -> Analysis:
    rng = np.random.default_rng(seed)
    bytes_ = rng.uniform(1e6, 1e9, n)
    ai = 10 ** rng.uniform(-1, 3, n)
    flops = bytes_ * ai
    sol = np.maximum(bytes_ / (4.8e12 * 0.938), flops / (67e12 * 0.8548))
    time_s = sol / rng.uniform(0.3, 0.99, n)
    rows = [{"op": f"k{i}", "flops": float(flops[i]), "bytes": float(bytes_[i]),
             "roof": "cuda_core.fp32", "time_s": float(time_s[i]), "timing": "device"}
            for i in range(n)]
    return analyze(columns_from_valid(rows), builtin_machines(), H200)


@pytest.mark.parametrize("n", [1, 10_000])
def test_one_and_ten_thousand_points(n, tmp_path):
    analysis = _synthetic(n)
    fig = roofline_figure([("synthetic", analysis)])
    assert sum(_points(fig).values()) == n
    save_figure(fig, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 10_000
    (x0, x1), (y0, y1) = fig.axes[0].get_xlim(), fig.axes[0].get_ylim()
    ai = analysis.priced.intensity_flops_per_byte
    rate = analysis.columns.flops / analysis.columns.time_s
    assert x0 < ai.min() and ai.max() < x1
    assert y0 < rate.min() and rate.max() < y1
    if n > 2000:
        assert all(c.get_rasterized() for c in fig.axes[0].collections
                   if (c.get_gid() or "").startswith("points:"))


def test_several_runs_share_a_chart_with_distinct_markers(example_analysis):
    other = _synthetic(20, seed=1)
    fig = roofline_figure([("base", example_analysis), ("new", other)])
    below_base = _by_gid(fig, "points:base:below")
    below_new = _by_gid(fig, "points:new:below")
    # every verdict keeps its run's marker: an impossible point of one run never hides another
    assert np.array_equal(_by_gid(fig, "points:base:impossible").get_paths()[0].vertices,
                          below_base.get_paths()[0].vertices)
    assert below_base.get_paths()[0] != below_new.get_paths()[0] or \
        not np.array_equal(below_base.get_paths()[0].vertices, below_new.get_paths()[0].vertices)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "base" in legend and "new" in legend


# ---------------------------------------------------------------- the analysis's ceilings

EXAMPLE_ROWS = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]


def _example(regime=None, mix=None) -> Analysis:
    return analyze(columns_from_valid(EXAMPLE_ROWS), builtin_machines(), regime=regime, mix=mix)


def test_roofs_follow_the_regime_the_verdicts_used():
    analysis = _example(regime="sustained")
    fig = roofline_figure([("examples", analysis)])
    flat = _by_gid(fig, "roof:h200:unit:tensor_core.bf16")
    assert np.allclose(flat.get_ydata(), 989.5e12 * 0.7077)  # 700.3 TFLOP/s, not 759.9
    label = _by_gid(fig, "label:h200:unit:tensor_core.bf16").get_text()
    assert "700.3 TFLOP/s" in label and "(sustained)" in label and "burst" not in label
    # the same rate priced the verdicts: the compute-bound gemm row's flops over its compute time
    gemm = int(np.flatnonzero(analysis.columns.op == "gemm_bf16")[0])
    priced_rate = analysis.columns.flops[gemm] / analysis.priced.compute_time_s[gemm]
    assert np.isclose(flat.get_ydata()[0], priced_rate)
    # the envelope (burst) stays visible, faint, where it differs
    envelope = _by_gid(fig, "roof:h200:unit:tensor_core.bf16:envelope")
    assert np.allclose(envelope.get_ydata(), 989.5e12 * 0.7680)
    assert envelope.get_alpha() < 0.5 and flat.get_alpha() in (None, 1.0)
    # fp32 was measured sustained only: its roof is its envelope, so no faint twin
    gids = {line.get_gid() for line in fig.axes[0].lines}
    assert "roof:h200:unit:cuda_core.fp32:envelope" not in gids
    assert np.allclose(_by_gid(fig, "roof:h200:unit:cuda_core.fp32").get_ydata(), 67e12 * 0.8548)
    ridge = _by_gid(fig, "ridge:h200:tensor_core.bf16")
    assert np.isclose(ridge.get_xdata()[0], 989.5e12 * 0.7077 / (4.8e12 * 0.9380))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("envelope") for t in legend)


def test_roofs_follow_the_mix_the_verdicts_used():
    analysis = _example(mix="copy")
    fig = roofline_figure([("examples", analysis)])
    roof = _by_gid(fig, "roof:h200:memory:hbm")
    x, y = np.asarray(roof.get_xdata()), np.asarray(roof.get_ydata())
    assert np.allclose(y / x, 4.8e12 * 0.8183)
    # the memory-bound split row was priced on exactly this bandwidth
    split = 1
    assert np.isclose(analysis.columns.bytes[split] / analysis.priced.memory_time_s[split],
                      4.8e12 * 0.8183)
    assert "(copy mix)" in _by_gid(fig, "label:h200:memory:hbm").get_text()
    assert "3.93 TB/s" in _by_gid(fig, "label:h200:memory:hbm").get_text()
    envelope = _by_gid(fig, "roof:h200:memory:hbm:envelope")
    assert np.isclose(envelope.get_ydata()[0] / envelope.get_xdata()[0], 4.8e12 * 0.9380)
    assert envelope.get_alpha() < 0.5
    gids = {line.get_gid() for line in fig.axes[0].lines}
    assert "roof:h200:memory:hbm:mix:copy" not in gids  # drawn once, as the solid roof
    assert "roof:h200:memory:hbm:mix:read" not in gids  # drawn once, as the envelope
    assert {"roof:h200:memory:hbm:mix:triad", "roof:h200:memory:hbm:mix:write"} <= gids
    ridge = _by_gid(fig, "ridge:h200:cuda_core.fp32")
    assert np.isclose(ridge.get_xdata()[0], 67e12 * 0.8548 / (4.8e12 * 0.8183))


def test_auto_mix_draws_the_envelope_and_says_rows_vary():
    fig = roofline_figure([("examples", _example(mix="auto"))])
    roof = _by_gid(fig, "roof:h200:memory:hbm")
    assert np.isclose(roof.get_ydata()[0] / roof.get_xdata()[0], 4.8e12 * 0.9380)
    assert "auto: each row at its own mix" in _by_gid(fig, "label:h200:memory:hbm").get_text()


def test_envelope_chart_has_no_faint_twins(example_analysis):
    fig = roofline_figure([("examples", example_analysis)])
    assert not [line.get_gid() for line in fig.axes[0].lines
                if (line.get_gid() or "").endswith(":envelope")]
    assert "(burst, envelope)" in _by_gid(fig, "label:h200:unit:tensor_core.bf16").get_text()


def test_runs_at_different_ceilings_cannot_share_roofs():
    with pytest.raises(InputError, match="different ceilings on h200"):
        roofline_figure([("a", _example()), ("b", _example(regime="sustained"))])


# ---------------------------------------------------------------- labels clear of the points

def _marker_boxes(fig):
    """Each plotted marker's display-space box, from its own path and transform."""
    ax = fig.axes[0]
    boxes = []
    for c in ax.collections:
        if not (isinstance(c, PathCollection) and (c.get_gid() or "").startswith("points:")):
            continue
        path = c.get_paths()[0]
        transforms = c.get_transforms()
        for k, offset in enumerate(ax.transData.transform(c.get_offsets())):
            t = transforms[k % len(transforms)]
            ext = path.get_extents(Affine2D(t))
            boxes.append(Bbox.from_extents(ext.x0 + offset[0], ext.y0 + offset[1],
                                           ext.x1 + offset[0], ext.y1 + offset[1]))
    return boxes


@pytest.mark.parametrize("regime", [None, "sustained", "burst"])
def test_roof_labels_cover_no_point_or_callout(regime):
    fig = roofline_figure([("examples", _example(regime=regime))])
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    labels = [t for t in ax.texts if (t.get_gid() or "").startswith("label:h200:unit:")]
    assert len(labels) == 4
    callouts = [t.get_window_extent(renderer) for t in ax.texts
                if (t.get_gid() or "").startswith("annotation:")]
    obstacles = _marker_boxes(fig) + callouts
    assert len(obstacles) == 7 + 2  # the priced rows, the impossible and anomaly callouts
    for label in labels:
        box = label.get_window_extent(renderer)
        hits = [o for o in obstacles if box.overlaps(o)]
        assert not hits, f"{label.get_text()!r} covers {hits}"
        others = [t for t in labels if t is not label]
        assert not any(box.overlaps(t.get_window_extent(renderer)) for t in others)
        assert ax.get_window_extent(renderer).contains(box.x1, box.y1)


def test_theoretical_bf16_label_sits_at_the_left_end_of_its_roof(example_analysis):
    fig = roofline_figure([("examples", example_analysis)])
    text = _by_gid(fig, "label:h200:unit:tensor_core.bf16:theoretical")
    assert text.get_text().endswith("theoretical 989.5 TFLOP/s")
    ridge = 989.5e12 / 4.8e12  # where the dashed roofs meet
    x, y = text.get_position()
    assert ridge < x < 2 * ridge and y > 989.5e12  # just right of the ridge, above its roof
    # the impossible gemm point (AI 5461, 1.1 PFLOP/s) is not under it
    renderer = fig.canvas.get_renderer()
    point = fig.axes[0].transData.transform((2199023255552 / 402653184, 2199023255552 / 0.002))
    assert not text.get_window_extent(renderer).contains(*point)


def test_blank_note_says_where_to_look():
    one = roofline_figure([("examples", _example())])
    assert _by_gid(one, "note:blank").get_text() == (
        "1 blank row not plotted (the model cannot price it; see `roofwise analyze`)")
    rows = [*EXAMPLE_ROWS, {**EXAMPLE_ROWS[-1], "op": "other"}]
    two = roofline_figure([("x", analyze(columns_from_valid(rows), builtin_machines()))])
    assert _by_gid(two, "note:blank").get_text() == (
        "2 blank rows not plotted (the model cannot price them; see `roofwise analyze`)")


# ---------------------------------------------------------------- nothing to draw

def test_plot_with_no_priced_row_exits_2_and_writes_nothing(tmp_path, capsys):
    from roofwise.cli import main
    row = {"op": "x", "flops": 1e9, "bytes": 1e9, "roof": "cuda_core.fp32", "time_s": 1e-3}
    records = tmp_path / "dev.jsonl"
    records.write_text(json.dumps({**row, "device": "H300"}) + "\n"
                       + json.dumps({**row, "device": "H400"}) + "\n")
    chart = tmp_path / "p3.png"
    assert main(["plot", str(records), "-o", str(chart)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"roofwise: error: {records}: no row could be priced (all 2 rows are blank); the "
        "first: no profile matches device 'H300'; pass --machine NAME (`roofwise machines` "
        "lists them)"]
    assert not chart.exists()
    # one priced row among blank ones: the chart is drawn, the blanks counted in its note
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(records.read_text() + json.dumps({**row, "device": "NVIDIA H200"}) + "\n")
    assert main(["plot", str(mixed), "-o", str(chart)]) == 0
    assert chart.read_bytes().startswith(b"\x89PNG")
    # several runs: a wholly blank run beside a priced one is still a chart
    assert main(["plot", str(records), str(mixed), "-o", str(tmp_path / "two.png")]) == 0


def test_plot_label_option_sets_how_many_rows_are_numbered(tmp_path):
    from roofwise.cli import main

    chart = tmp_path / "c.svg"
    assert main(["plot", str(EXAMPLES), "-o", str(chart), "--label", "2"]) == 0
    text = chart.read_text()
    assert text.count('id="lost:') == 2
    assert main(["plot", str(EXAMPLES), "-o", str(chart), "--label", "0"]) == 0
    assert 'id="lost:' not in chart.read_text()


def test_numbers_never_hide_another_rows_point(example_analysis):
    # the rmsnorm (AI 1.00) and the split qk op (AI 1.25) sit 0.1 decade apart: a number put
    # at one fixed offset from the first covered the second
    fig = roofline_figure([("examples", example_analysis)], label_rows=4)
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    centres = np.vstack([ax.transData.transform(np.asarray(c.get_offsets(), dtype=float))
                         for c in ax.collections if (c.get_gid() or "").startswith("points:")])
    marks = [t for t in ax.texts if (t.get_gid() or "").startswith("lost:")]
    assert len(marks) == 4
    boxes = [t.get_window_extent(renderer) for t in marks]
    for mark, box in zip(marks, boxes, strict=True):
        own = ax.transData.transform(np.array([mark.xy], dtype=float))[0]
        others = centres[np.hypot(*(centres - own).T) > 1.0]
        inside = ((others[:, 0] >= box.x0) & (others[:, 0] <= box.x1)
                  & (others[:, 1] >= box.y0) & (others[:, 1] <= box.y1))
        assert not inside.any(), mark.get_text()
        # beside its own point: its centre within 25 points of it
        centre = np.array([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2])
        assert np.hypot(*(centre - own)) <= 25 * fig.dpi / 72
    for a, b in itertools.combinations(boxes, 2):  # no number on another
        assert a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0


UNSAFE_NAMES = ["a\ufeffb", "rtl\u202eop", "cr\rop", "nul\x00", "us\x1f", "del\x7f", "c1\x85\x9f",
                "sur\udc80", "ls\u2028ps\u2029", "zw\u200b\u200d", "tab\tnl\n"]


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_chart_labels_with_control_zero_width_and_bidi_characters(tmp_path, suffix):
    """Issue 20: the PDF backend raised IndexError on such names; every format writes them,
    each shown as its escape."""
    import json

    from roofwise.base.text import for_mpl
    from roofwise.cli import main

    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps({"op": name, "flops": 1e9 * (k + 1), "bytes": 1e8,
                                          "roof": "cuda_core.fp32", "time_s": 1e-4})
                              for k, name in enumerate(UNSAFE_NAMES)) + "\n")
    chart = tmp_path / f"x{suffix}"
    assert main(["plot", str(path), "-m", "h200", "-o", str(chart)]) == 0
    assert chart.stat().st_size > 1000
    assert for_mpl("a\ufeffb$") == "a\\ufeffb\\$" and for_mpl("cr\rop") == "cr\\rop"
    assert for_mpl("sur\udc80 ls\u2028") == "sur\\udc80 ls\\u2028"
    assert for_mpl("caf\u00e9 \u00a0x") == "caf\u00e9 \u00a0x"
    if suffix == ".svg":
        text = chart.read_text(encoding="utf-8")
        assert "\ufeff" not in text and "\u202e" not in text
