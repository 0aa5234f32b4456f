"""Inline SVG charts drawn in Python: no script, no network, nothing to load.

Text never sits on the plot: titles and legends go above it, tick labels beside and below
it, so no label can cover the data or another label. Widths of text are estimated (SVG has
no text measurement without a browser) generously, from the font size."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from itertools import pairwise

from spark.page.ticks import byte_ticks, duration_ticks, time_ticks
from spark.page.units import human_bytes, human_duration
from spark.report import StateBucket, VolumeSeries

STATE_COLOURS = {"OPEN": "#2e9e5b", "THROTTLE": "#f0a030", "PAUSE": "#d64545"}
FALLBACK_COLOUR = "#7b52ab"
NO_DATA_COLOUR = "#e6e6e6"
LINE_COLOUR = "#2b6cb0"
LABEL_COLOUR = "#444"
FONT_FAMILY = "system-ui, sans-serif"
FONT_SIZE = 11
LINE_HEIGHT = 15
# Room a tick label needs along the time axis (pixels), and the height of the axis below
# the plot: tick labels clear of the lowest value label, then the dates.
TICK_SPACING = 90
AXIS_BELOW = 18 + LINE_HEIGHT + 7
# The width of the charts that take a whole row. The page never draws a chart wider than its
# own width (it scales down, never up), and the narrowest screen it is made for (1024 px)
# leaves a row about 950 px: at 900 the text stays at FONT_SIZE px on every screen.
WIDE_CHART = 900
VOLUME_CHART_WIDTH = 600


def _font(size: int = FONT_SIZE, bold: bool = False) -> str:
    return f'font-family="{FONT_FAMILY}" font-size="{size}"' + (
        ' font-weight="600"' if bold else ""
    )


def text_width(text: str, size: int = FONT_SIZE) -> float:
    """A generous estimate of the width of ``text`` in the chart font (most glyphs of a sans
    serif font are narrower than 0.62 em)."""
    return len(text) * size * 0.62


def _text(
    x: float,
    y: float,
    content: str,
    anchor: str = "start",
    size: int = FONT_SIZE,
    bold: bool = False,
    colour: str = LABEL_COLOUR,
    css: str = "",
) -> str:
    css_class = f' class="{css}"' if css else ""
    return f'<text{css_class} x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {_font(size, bold)} fill="{colour}">{escape(content)}</text>'


def _clipped(text: str, width: float, size: int = FONT_SIZE) -> str:
    """``text`` shortened with an ellipsis in the middle to fit ``width`` (the full text is in
    the chart's title)."""
    if text_width(text, size) <= width:
        return text
    keep = max(int(width / (size * 0.62)) - 1, 2)
    return text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2) :]


def _time_label(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


class _Frame:
    """Maps time and value onto a plot area and draws its axes."""

    def __init__(
        self,
        width: int,
        height: int,
        first: float,
        last: float,
        top_value: float,
        top: int,
        left: int = 64,
        right: int = 20,
    ) -> None:
        self.width, self.height = width, height
        # below the plot: the tick labels, then the dates
        self.left, self.right, self.top, self.bottom = left, right, top, AXIS_BELOW
        self.first, self.last = first, max(last, first + 1e-6)
        self.top_value = max(top_value, 1.0)

    @property
    def plot_right(self) -> float:
        return self.width - self.right

    @property
    def plot_bottom(self) -> float:
        return self.height - self.bottom

    def x(self, t: float) -> float:
        return self.left + (t - self.first) / (self.last - self.first) * (
            self.plot_right - self.left
        )

    def y(self, value: float) -> float:
        return self.top + (self.plot_bottom - self.top) * (
            1 - min(max(value, 0.0), self.top_value) / self.top_value
        )

    def time_axis(self) -> list[str]:
        """Ticks on round UTC times; under the first tick of each day, its date."""
        base = self.plot_bottom
        parts = [
            f'<line x1="{self.left}" y1="{base}" x2="{self.plot_right}" y2="{base}" stroke="#888"/>'
        ]
        most = max(int((self.plot_right - self.left) / TICK_SPACING), 2)
        for tick in time_ticks(self.first, self.last, most):
            x = self.x(tick.t)
            parts.append(
                f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="#888"/>'
            )
            parts.append(self._centred(x, base + 18, tick.label, "tick"))
            if tick.date:
                parts.append(self._centred(x, base + 18 + LINE_HEIGHT, tick.date, "date"))
        return parts

    def _centred(self, x: float, y: float, text: str, css: str) -> str:
        """Centred under ``x``, unless that would cross the chart's edge."""
        half = text_width(text) / 2
        if x - half < 2:
            return _text(2, y, text, "start", css=css)
        if x + half > self.width - 2:
            return _text(self.width - 2, y, text, "end", css=css)
        return _text(x, y, text, "middle", css=css)

    def byte_axis(self) -> list[str]:
        parts = []
        for value, label in byte_ticks(self.top_value):
            y = self.y(value)
            parts.append(
                f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.plot_right}" y2="{y:.1f}" stroke="#eee"/>'
            )
            parts.append(_text(self.left - 6, y + 4, label, "end", css="value"))
        return parts


def _svg(width: int, height: int, kind: str, label: str, body: list[str]) -> str:
    return (
        f'<svg class="chart" data-chart="{kind}" role="img" aria-label="{escape(label)}" viewBox="0 0 {width} {height}" '
        f'width="100%" style="max-width: {width}px" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(label)}</title>" + "".join(body) + "</svg>"
    )


def _legend(
    items: Sequence[tuple[str, str, str]], x: float, y: float, right: float
) -> tuple[list[str], float]:
    """Legend entries (name, colour, swatch: "box", "line", "dash" or "dot") from (x, y), wrapping
    before ``right``; returns the parts and the baseline of the last line."""
    parts = []
    start = x
    for name, colour, swatch in items:
        needed = 16 + text_width(name)
        if x + needed > right and x > start:
            x, y = start, y + LINE_HEIGHT
        if swatch == "box":
            parts.append(
                f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{colour}"/>'
            )
        else:
            dash = {"dash": ' stroke-dasharray="4 3"', "dot": ' stroke-dasharray="2 3"'}.get(
                swatch, ""
            )
            parts.append(
                f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 11:.1f}" y2="{y - 4:.1f}" stroke="{colour}" stroke-width="2"{dash}/>'
            )
        parts.append(_text(x + 15, y, name, css="legend"))
        x += needed + 12
    return parts, y


def _segments(points: Sequence[tuple[float, int]]) -> list[list[tuple[float, int]]]:
    """Split a series where observations stop for much longer than usual (a gap in the data)."""
    if len(points) < 3:
        return [list(points)]
    steps = sorted(b[0] - a[0] for a, b in pairwise(points))
    usual = steps[len(steps) // 2]
    segments: list[list[tuple[float, int]]] = [[points[0]]]
    for before, point in pairwise(points):
        if point[0] - before[0] > 5 * usual:
            segments.append([])
        segments[-1].append(point)
    return segments


def _value_scale(series: VolumeSeries) -> float:
    """The top of the value axis: room above the highest of the data and the limits, up to the
    capacity. (On a scale of the whole capacity, a 1 TiB volume near a 50 GiB limit would be a
    flat line at the bottom.)"""
    levels = [level for _, level in series.hard + series.soft if level is not None]
    peak = max(v for _, v in series.points)
    highest = max(peak, *levels, 0.0)
    return (
        min(highest * 1.15, float(series.total_bytes)) if series.total_bytes > 0 else highest * 1.15
    )


# How far past the end of the history a chart reaches to show where the forecast meets the
# hard limit (a share of the history's span; a later meeting is drawn to the chart's edge).
PROJECTION_REACH = 0.25


def _step_lines(
    steps: Sequence[tuple[float, float | None]], end: float, frame: _Frame
) -> list[list[tuple[float, float]]]:
    """A limit's levels in force over time as the corners of step lines (x, y), one line per
    stretch where the limit was set."""
    lines: list[list[tuple[float, float]]] = []
    for (t, level), following in zip(steps, [*steps[1:], None]):
        until = following[0] if following is not None else end
        if level is None:
            continue
        y = frame.y(level)
        if lines and lines[-1][-1][0] == frame.x(t):
            lines[-1].append((frame.x(t), y))
        else:
            lines.append([(frame.x(t), y)])
        lines[-1].append((frame.x(until), y))
    return lines


def _projection(series: VolumeSeries, frame: _Frame) -> str:
    """The forecast's line from the last point to where it meets the hard limit, cut at the
    chart's edge."""
    if series.projected is None:
        return ""
    (t0, v0), (t1, v1) = series.points[-1], series.projected
    if t1 > frame.last and t1 > t0:
        v1 = v0 + (v1 - v0) * (frame.last - t0) / (t1 - t0)
        t1 = frame.last
    tip = f"forecast: the hard limit at {_time_label(series.projected[0])}"
    return (
        f'<line class="projection" x1="{frame.x(t0):.1f}" y1="{frame.y(v0):.1f}" x2="{frame.x(t1):.1f}" y2="{frame.y(v1):.1f}" '
        f'stroke="{LINE_COLOUR}" stroke-width="1.5" stroke-dasharray="2 3"><title>{escape(tip)}</title></line>'
    )


def volume_chart(
    series: VolumeSeries,
    first: float,
    last: float,
    width: int = VOLUME_CHART_WIDTH,
    height: int = 270,
) -> str:
    """Usable bytes of one volume over time, against its hard and soft limits as they were in
    force (step lines, named in the legend above the plot, not on it), and the forecast's
    line to the hard limit when the volume is filling towards it."""
    title = f"broker {series.broker_id} · {series.log_dir}"
    lowest = min(v for _, v in series.points)
    summary = f"lowest {human_bytes(lowest)} available of {human_bytes(series.total_bytes)}"
    head = [
        _text(
            8, 16, _clipped(title, width - 16, 13), size=13, bold=True, colour="#222", css="title"
        ),
        _text(8, 16 + LINE_HEIGHT + 1, summary, colour="#555", css="summary"),
    ]
    changed = " (changed)" if len({level for _, level in series.hard}) > 1 else ""
    legend = [
        ("available", LINE_COLOUR, "line"),
        (f"hard limit {human_bytes(series.hard_bytes)}{changed}", STATE_COLOURS["PAUSE"], "dash"),
    ]
    if any(level is not None for _, level in series.soft):
        now = f"{human_bytes(series.soft_bytes)}" if series.soft_bytes is not None else "removed"
        soft_changed = (
            " (changed)"
            if len({level for _, level in series.soft}) > 1 and series.soft_bytes is not None
            else ""
        )
        legend.append((f"soft limit {now}{soft_changed}", STATE_COLOURS["THROTTLE"], "dash"))
    if series.projected is not None:
        legend.append(("forecast", LINE_COLOUR, "dot"))
    legend_parts, legend_bottom = _legend(legend, 8, 16 + 2 * LINE_HEIGHT + 2, width - 8)
    top = int(legend_bottom) + 14
    shown_until = (
        last
        if series.projected is None
        else max(last, min(series.projected[0], last + PROJECTION_REACH * (last - first)))
    )
    frame = _Frame(width, height + top - 62, first, shown_until, _value_scale(series), top=top)
    body = [
        f'<rect x="0" y="0" width="{frame.width}" height="{frame.height}" fill="white"/>',
        *head,
        *legend_parts,
    ]
    body += frame.byte_axis()
    for corners in _step_lines(series.hard, frame.last, frame):
        outline = " ".join(
            f"{x:.1f},{y:.1f}"
            for x, y in [
                (corners[0][0], frame.plot_bottom),
                *corners,
                (corners[-1][0], frame.plot_bottom),
            ]
        )
        body.append(f'<polygon points="{outline}" fill="#d64545" opacity="0.08"/>')
    for kind, steps, colour in (
        ("hard", series.hard, STATE_COLOURS["PAUSE"]),
        ("soft", series.soft, STATE_COLOURS["THROTTLE"]),
    ):
        for corners in _step_lines(steps, frame.last, frame):
            points = " ".join(f"{x:.1f},{y:.1f}" for x, y in corners)
            body.append(
                f'<polyline class="limit {kind}" points="{points}" fill="none" stroke="{colour}" stroke-dasharray="6 4" stroke-width="1.5"/>'
            )
    body.append(_projection(series, frame))
    for segment in _segments(series.points):
        if len(segment) == 1:
            ((t, v),) = segment
            body.append(
                f'<circle cx="{frame.x(t):.1f}" cy="{frame.y(v):.1f}" r="2" fill="{LINE_COLOUR}"/>'
            )
        else:
            coordinates = " ".join(f"{frame.x(t):.1f},{frame.y(v):.1f}" for t, v in segment)
            body.append(
                f'<polyline class="series" points="{coordinates}" fill="none" stroke="{LINE_COLOUR}" stroke-width="1.8"/>'
            )
    body += frame.time_axis()
    return _svg(
        frame.width, frame.height, "volume", f"Available bytes of {title} against its limits", body
    )


def state_timeline_chart(
    buckets: Sequence[StateBucket], first: float, last: float, width: int = WIDE_CHART
) -> str:
    """Two lanes over time: the state in force, and when the factor came from last-valid or fallback;
    as high as its legend and lanes need."""
    lane_names = ("state", "factor source")
    left = int(max(text_width(name) for name in lane_names)) + 16
    legend = [
        *[(name, colour, "box") for name, colour in STATE_COLOURS.items()],
        ("fallback / last-valid", FALLBACK_COLOUR, "box"),
        ("observed", "#cfe8d8", "box"),
        ("no data", NO_DATA_COLOUR, "box"),
    ]
    legend_parts, legend_bottom = _legend(legend, left, 16, width - 8)
    lane_height, lane_gap = 22, 8
    lanes_top = int(legend_bottom) + 12
    lanes = [(name, lanes_top + i * (lane_height + lane_gap)) for i, name in enumerate(lane_names)]
    frame = _Frame(
        width, lanes[-1][1] + lane_height + AXIS_BELOW, first, last, 1.0, top=lanes_top, left=left
    )
    body = [
        f'<rect x="0" y="0" width="{width}" height="{frame.height}" fill="white"/>',
        *legend_parts,
    ]
    for name, y in lanes:
        body.append(_text(left - 8, y + 15, name, "end", css="lane"))
        body.append(
            f'<rect x="{left}" y="{y}" width="{frame.plot_right - left}" height="{lane_height}" fill="{NO_DATA_COLOUR}"/>'
        )
    for bucket in buckets:
        x0, x1 = frame.x(bucket.start), frame.x(bucket.end)
        w = max(x1 - x0, 0.8)
        source = "fallback or last-valid" if bucket.fallback else "observed"
        tip = f"from {_time_label(bucket.start)}: {bucket.state}, factor {source}, {bucket.rounds} rounds"
        body.append(
            f'<rect class="state {bucket.state}" x="{x0:.2f}" y="{lanes[0][1]}" width="{w:.2f}" height="{lane_height}" fill="{STATE_COLOURS[bucket.state]}" shape-rendering="crispEdges"><title>{escape(tip)}</title></rect>'
        )
        colour, css = (FALLBACK_COLOUR, "fallback") if bucket.fallback else ("#cfe8d8", "observed")
        body.append(
            f'<rect class="{css}" x="{x0:.2f}" y="{lanes[1][1]}" width="{w:.2f}" height="{lane_height}" fill="{colour}" shape-rendering="crispEdges"><title>{escape(tip)}</title></rect>'
        )
    body += frame.time_axis()
    return _svg(width, frame.height, "timeline", "State timeline", body)


def day_bars_chart(days: Sequence[dict], width: int = WIDE_CHART, height: int = 230) -> str:
    """Time per UTC day in OPEN / THROTTLE / PAUSE (stacked) and on the fallback (a mark)."""
    legend = [
        *[(name, colour, "box") for name, colour in STATE_COLOURS.items()],
        ("on the fallback", FALLBACK_COLOUR, "line"),
    ]
    left, right = 64, 20
    legend_parts, legend_bottom = _legend(legend, left, 16, width - 8)
    top, bottom = int(legend_bottom) + 14, AXIS_BELOW
    plot_h = height - top - bottom
    ticks = duration_ticks(max((d["covered_seconds"] for d in days), default=0.0))
    scale = ticks[-1][0]
    body = [f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>', *legend_parts]
    for seconds, label in ticks:
        y = top + plot_h * (1 - seconds / scale)
        body.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#eee"/>'
        )
        body.append(_text(left - 6, y + 4, label, "end", css="value"))
    slot = (width - left - right) / max(len(days), 1)
    bar = min(slot * 0.7, 48)
    # A label every few days, so that labels keep TICK_SPACING / 2 apart; the year once.
    every = max(1, -(-int(TICK_SPACING / 2) // max(int(slot), 1)))
    year = None
    for i, day in enumerate(days):
        x = left + slot * i + (slot - bar) / 2
        y = top + plot_h
        name = str(day["day"])
        for state in ("OPEN", "THROTTLE", "PAUSE"):
            seconds = day[f"{state.lower()}_seconds"]
            h = plot_h * seconds / scale
            y -= h
            body.append(
                f'<rect class="day {state}" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="{STATE_COLOURS[state]}"><title>{name}: {state} {human_duration(seconds) or "0 s"}</title></rect>'
            )
        fallback = day["source_fallback_seconds"]
        if fallback > 0:
            fy = top + plot_h * (1 - fallback / scale)
            body.append(
                f'<line x1="{x - 3:.1f}" y1="{fy:.1f}" x2="{x + bar + 3:.1f}" y2="{fy:.1f}" stroke="{FALLBACK_COLOUR}" stroke-width="3"><title>{name}: on the fallback {human_duration(fallback)}</title></line>'
            )
        if i % every == 0:
            body.append(_text(x + bar / 2, height - bottom + 18, name[5:], "middle", css="tick"))
            if name[:4] != year:
                year = name[:4]
                body.append(
                    _text(
                        x + bar / 2, height - bottom + 18 + LINE_HEIGHT, year, "middle", css="date"
                    )
                )
    body.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#888"/>'
    )
    return _svg(width, height, "days", "Time per day in each state", body)
