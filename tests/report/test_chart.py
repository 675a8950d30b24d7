"""The roofline chart, inspected through matplotlib's artists (never pixels)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_hex

from roofwise.analysis import Analysis, analyze
from roofwise.errors import InputError
from roofwise.profiles import builtin_machines
from roofwise.records import columns_from_valid
from roofwise.report.chart import VERDICT_COLOR, roofline_figure, save_figure

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
                            "impossible": 2}
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
    assert sorted(callouts) == ["IMPOSSIBLE: gemm_bf16", "IMPOSSIBLE: qk_norm_rope_quant"]
    assert "1 blank row not plotted" in _by_gid(fig, "note:blank").get_text()
    # point coordinates: the at_ceiling row is the fused qk op at 17.5 us
    ok = _by_gid(fig, "points:examples:at_ceiling").get_offsets()[0]
    assert np.allclose(ok, (189235200 / 67764736, 189235200 / 1.75e-05))


def test_latency_floor_bar_spans_floor_rate_to_roof(example_analysis):
    fig = roofline_figure([("examples", example_analysis)])
    bars = _by_gid(fig, "latency_floor:h200")
    assert isinstance(bars, PolyCollection)
    (bar,) = bars.get_paths()  # only the decode step has SOL below the 3 us floor
    ys = bar.vertices[:, 1]
    assert np.isclose(ys.min(), 46200 / 20e-6)  # flops / measured floor
    assert np.isclose(ys.max(), 4.8e12 * 0.9380 * 46200 / 17056)  # its memory roof
    decode = _by_gid(fig, "points:examples:latency_bound").get_offsets()[0]
    assert ys.min() < decode[1] < ys.max()


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
    assert below_base.get_paths()[0] != below_new.get_paths()[0] or \
        not np.array_equal(below_base.get_paths()[0].vertices, below_new.get_paths()[0].vertices)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "base" in legend and "new" in legend
