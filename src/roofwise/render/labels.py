"""Roof labels placed so they cover no point, callout, ridge marker, roof or other label.

The chart draws; this module only moves text it already drew. It finds what to move and what
to avoid by the chart's `gid`s (see `chart`): `label:<machine>:unit:<key>[:theoretical]` texts
are moved along their `roof:<machine>:unit:<key>[:theoretical]` lines; `points:` scatters,
`annotation:` callouts, `...:ridge:...` texts, `ridge:` markers and every `roof:` line are
obstacles. Memory-roof labels (sloped) stay where the chart put them.

The API, in the order a caller needs it:

- `place_roof_labels(ax)`: the whole job, after the points and callouts are drawn;
- `LABEL_GAP`: how far above or below its roof a label starts (the chart's first placement);
- the pieces, for a chart that places other labels: `roof_label_spots` (candidate spots, best
  first), `obstacle_boxes` (display-space boxes to avoid), `place_on_first_free` (try spots in
  order), `overlap_area` (the cost of a spot), `Spot` (one candidate).

Boxes are `(x0, y0, x1, y1)` rows in display pixels.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Literal, NamedTuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.text import Text

LABEL_GAP = 1.12  # a roof label sits this factor above or below its roof
_LABEL_X_GAP = 1.15  # and starts this factor right of the roof's left end (the ridge)
_LABEL_STEP_DECADES = 0.05  # how far a label slides per try to clear the points
_LABEL_RIGHT_GAP = 1.04  # a label that ends at the right edge stops this factor short of it

VAlign = Literal["top", "bottom"]
HAlign = Literal["left", "right"]


class Spot(NamedTuple):
    """One place a label may take: its text (it may shorten), data position, alignments."""

    text: str
    x: float
    y: float
    va: VAlign
    ha: HAlign


def place_roof_labels(ax: Axes) -> None:
    """Move each flat roof's label along its roof until it covers no point, callout or label.

    A label starts at the left end of its roof, just right of the ridge: below the solid roof,
    above the dashed one. Where points sit there, it slides right; then a theoretical label
    drops the unit key (the solid label just below names it); then it steps further off its
    roof. It never crosses to the other side, where it would read as the other roof's label.
    Where every spot is taken, it keeps the one that covers least, on a white backing.
    """
    fig = ax.get_figure(root=True)
    renderer = fig.canvas.get_renderer()  # type: ignore[union-attr]
    obstacles = obstacle_boxes(ax, renderer)
    frame = ax.get_window_extent(renderer)
    lines = {line.get_gid(): line for line in ax.lines}
    labels = [t for t in ax.texts if ":unit:" in (t.get_gid() or "")
              and (t.get_gid() or "").startswith("label:")]
    labels.sort(key=lambda t: (t.get_gid() or "").endswith(":theoretical"))  # solid ones first
    for text in labels:
        gid = text.get_gid() or ""
        line = lines.get("roof:" + gid.removeprefix("label:"))
        if line is None:
            continue
        xs, ys = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        place_on_first_free(text, renderer, obstacles, frame, roof_label_spots(
            text.get_text(), gid.endswith(":theoretical"), float(xs[0]), float(xs[-1]),
            float(ys[0])))
        obstacles = np.vstack([obstacles, _box(text.get_window_extent(renderer))[None]])


def roof_label_spots(text: str, theoretical: bool, x_start: float, x_end: float,
                     y: float) -> list[Spot]:
    """Where a label of the flat roof at `y` from `x_start` to `x_end` may go, best first:
    near its roof, on its own side (below a solid roof, above a `theoretical` one), at the left.

    Then, for a roof too short to hold it (the ridge near the right edge), ending at the
    right edge of the axes, and last sliding left of the ridge: a label always fits somewhere.
    """
    texts = [text]
    if theoretical and " theoretical " in text:
        tag = text[:text.index(": ") + 2] if ": " in text else ""  # the machine, on shared charts
        texts.append(f"{tag}theoretical {text.split(' theoretical ', 1)[1]}")
    # the solid roof's label sits below it, the dashed one's above: never across the other
    side: list[tuple[float, VAlign]] = (
        [(y * LABEL_GAP, "bottom"), (y * LABEL_GAP ** 2, "bottom")] if theoretical
        else [(y / LABEL_GAP, "top"), (y / LABEL_GAP ** 2, "top")])
    steps = max(1, int(math.log10(x_end / x_start) / _LABEL_STEP_DECADES))
    xs = [x_start * _LABEL_X_GAP * 10 ** (k * _LABEL_STEP_DECADES) for k in range(steps)]
    spots = [Spot(t, x, side_y, va, "left") for side_y, va in side for t in texts for x in xs]
    right_end = x_end / _LABEL_RIGHT_GAP
    spots += [Spot(t, right_end, side_y, va, "right") for side_y, va in side for t in texts]
    spots += [Spot(t, x_start * 10 ** (-k * _LABEL_STEP_DECADES), side_y, va, "right")
              for side_y, va in side for t in texts for k in range(1, 40)]
    return spots


def place_on_first_free(text: Text, renderer: Any, obstacles: np.ndarray, frame: Any,
                        spots: list[Spot]) -> None:
    """Put `text` on the first spot that covers none of `obstacles` and fits inside `frame`.

    Where none is free (a dense cloud of points, several machines' roofs), it takes the
    fitting spot that covers least, on a translucent white backing above the points. A spot
    that does not fit inside the axes is never taken while one that fits exists.
    """
    # a text's box is the same shape wherever it is anchored: laid out once per wording and
    # alignment, then moved to each spot's anchor (laying it out per spot cost a second for a
    # six-card chart's labels)
    anchors = text.get_transform().transform(np.array([(s.x, s.y) for s in spots], float))
    shapes: dict[tuple[str, str, str], np.ndarray] = {}
    best: tuple[float, Spot] | None = None
    for spot, anchor in zip(spots, np.tile(anchors, 2), strict=True):
        shape = shapes.get((spot.text, spot.va, spot.ha))
        if shape is None:
            _move(text, spot)
            shape = shapes[(spot.text, spot.va, spot.ha)] = (
                _box(text.get_window_extent(renderer)) - anchor)
        box = shape + anchor
        if box[2] > frame.x1 or box[0] < frame.x0 or box[3] > frame.y1 or box[1] < frame.y0:
            continue
        covered = overlap_area(box, obstacles)
        if covered == 0.0:
            _move(text, spot)
            return
        if best is None or covered < best[0]:
            best = (covered, spot)
    fallback = next((s for s in spots if s.ha == "right"), spots[0])  # ends at the edge
    _move(text, best[1] if best is not None else fallback)
    text.set_bbox({"boxstyle": "square,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    text.set_zorder(7.5)  # above the points (6, 7), below the callouts (8)


def overlap_area(box: np.ndarray, obstacles: np.ndarray) -> float:
    """Total area of `box` (x0, y0, x1, y1) shared with each obstacle box, in pixels^2."""
    if not len(obstacles):
        return 0.0
    width = np.minimum(box[2], obstacles[:, 2]) - np.maximum(box[0], obstacles[:, 0])
    height = np.minimum(box[3], obstacles[:, 3]) - np.maximum(box[1], obstacles[:, 1])
    return float(np.sum(np.clip(width, 0, None) * np.clip(height, 0, None)))


def obstacle_boxes(ax: Axes, renderer: Any) -> np.ndarray:
    """Display-space boxes a roof label must not cover: points, callouts, ridges, roofs."""
    boxes = [np.zeros((0, 4))]
    scale = ax.get_figure(root=True).dpi / 72.0  # type: ignore[union-attr]
    for c in ax.collections:
        if not (isinstance(c, PathCollection) and (c.get_gid() or "").startswith("points:")):
            continue
        centres = ax.transData.transform(np.asarray(c.get_offsets(), dtype=np.float64))
        # a marker of area s pt^2 reaches sqrt(s)/2 out, a diamond's tips about 1.4x that
        radius = np.sqrt(np.asarray(c.get_sizes(), dtype=np.float64)) * 0.7 * scale + 1.0
        radius = np.broadcast_to(radius if len(radius) else np.zeros(1), (len(centres),))
        boxes.append(np.column_stack([centres - radius[:, None], centres + radius[:, None]]))
    for t in ax.texts:
        gid = t.get_gid() or ""
        if gid.startswith("annotation:") or ":ridge:" in gid:
            pad = 0.3 * float(t.get_fontsize()) * scale  # the callout's box around its text
            boxes.append(_box(t.get_window_extent(renderer))[None] + [-pad, -pad, pad, pad])
    for line in ax.lines:
        if (line.get_gid() or "").startswith("roof:"):
            boxes.append(_line_boxes(ax, line))
        if (line.get_gid() or "").startswith("ridge:"):
            (centre,) = ax.transData.transform(np.column_stack(
                [line.get_xdata(), line.get_ydata()]).astype(float))
            r = line.get_markersize() / 2 * scale + 1.0
            boxes.append(np.array([[centre[0] - r, centre[1] - r, centre[0] + r,
                                    centre[1] + r]]))
    return np.vstack(boxes)


def _move(text: Text, spot: Spot) -> None:
    text.set_text(spot.text)
    text.set_position((spot.x, spot.y))
    text.set_verticalalignment(spot.va)
    text.set_horizontalalignment(spot.ha)


def _box(extent: Any) -> np.ndarray:
    return np.array([extent.x0, extent.y0, extent.x1, extent.y1], dtype=float)


def _line_boxes(ax: Axes, line: Line2D, step_px: float = 3.0) -> np.ndarray:
    """Small boxes along a roof line, so a label never sits across another roof."""
    ends = ax.transData.transform(np.column_stack(
        [line.get_xdata(), line.get_ydata()]).astype(np.float64))
    parts = []
    for (x0, y0), (x1, y1) in itertools.pairwise(ends):
        n = max(2, int(math.hypot(x1 - x0, y1 - y0) / step_px) + 1)
        t = np.linspace(0.0, 1.0, n)
        parts.append(np.column_stack([x0 + t * (x1 - x0), y0 + t * (y1 - y0)]))
    if not parts:
        return np.zeros((0, 4))
    pts = np.vstack(parts)
    return np.column_stack([pts - 1.0, pts + 1.0])
