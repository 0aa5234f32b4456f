"""Inline SVG charts drawn in Python: no script, no network, nothing to load."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from spark.chart_data import StateBucket, VolumeSeries

STATE_COLOURS = {"OPEN": "#2e9e5b", "THROTTLE": "#f0a030", "PAUSE": "#d64545"}
FALLBACK_COLOUR = "#7b52ab"
NO_DATA_COLOUR = "#e6e6e6"
LINE_COLOUR = "#2b6cb0"
FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def human_bytes(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"


def _time_label(epoch: float, span: float) -> str:
    moment = datetime.fromtimestamp(epoch, tz=UTC)
    if span <= 2 * 86400:
        return moment.strftime("%m-%d %H:%M")
    return moment.strftime("%Y-%m-%d")


class _Frame:
    """Maps time and value onto a plot area and draws its axes."""

    def __init__(self, width: int, height: int, first: float, last: float, top_value: float, left: int = 72) -> None:
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = left, 16, 26, 34
        self.first, self.last = first, max(last, first + 1e-6)
        self.top_value = max(top_value, 1.0)

    def x(self, t: float) -> float:
        return self.left + (t - self.first) / (self.last - self.first) * (self.width - self.left - self.right)

    def y(self, value: float) -> float:
        plot = self.height - self.top - self.bottom
        return self.top + plot * (1 - min(max(value, 0.0), self.top_value) / self.top_value)

    def time_axis(self, ticks: int = 5) -> list[str]:
        parts = []
        base = self.height - self.bottom
        for i in range(ticks):
            t = self.first + (self.last - self.first) * i / (ticks - 1)
            x = self.x(t)
            anchor = "start" if i == 0 else "end" if i == ticks - 1 else "middle"
            parts.append(f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="#888"/>')
            parts.append(f'<text x="{x:.1f}" y="{base + 16}" text-anchor="{anchor}" {FONT} fill="#444">{_time_label(t, self.last - self.first)}</text>')
        parts.append(f'<line x1="{self.left}" y1="{base}" x2="{self.width - self.right}" y2="{base}" stroke="#888"/>')
        return parts

    def value_axis(self, ticks: int = 5) -> list[str]:
        parts = []
        for i in range(ticks):
            value = self.top_value * i / (ticks - 1)
            y = self.y(value)
            parts.append(f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.width - self.right}" y2="{y:.1f}" stroke="#eee"/>')
            parts.append(f'<text x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end" {FONT} fill="#444">{human_bytes(value)}</text>')
        return parts


def _svg(width: int, height: int, kind: str, label: str, body: list[str]) -> str:
    return (
        f'<svg class="chart" data-chart="{kind}" role="img" aria-label="{escape(label)}" viewBox="0 0 {width} {height}" '
        f'width="100%" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(label)}</title>" + "".join(body) + "</svg>"
    )


def _segments(points: Sequence[tuple[float, int]]) -> list[list[tuple[float, int]]]:
    """Split a series where observations stop for much longer than usual (a gap in the data)."""
    if len(points) < 3:
        return [list(points)]
    steps = sorted(b[0] - a[0] for a, b in zip(points, points[1:]))
    usual = steps[len(steps) // 2]
    segments: list[list[tuple[float, int]]] = [[points[0]]]
    for before, point in zip(points, points[1:]):
        if point[0] - before[0] > 5 * usual:
            segments.append([])
        segments[-1].append(point)
    return segments


def volume_chart(series: VolumeSeries, first: float, last: float, width: int = 560, height: int = 230) -> str:
    """Usable bytes of one volume over time, against its hard and soft limits."""
    frame = _Frame(width, height, first, last, series.total_bytes)
    body = [f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>']
    body += frame.value_axis()
    hard_y = frame.y(series.hard_bytes)
    plot_bottom = height - frame.bottom
    body.append(f'<rect x="{frame.left}" y="{hard_y:.1f}" width="{width - frame.left - frame.right}" height="{max(plot_bottom - hard_y, 0):.1f}" fill="#d64545" opacity="0.08"/>')
    levels = [("hard limit", series.hard_bytes, STATE_COLOURS["PAUSE"])]
    if series.soft_bytes is not None:
        levels.append(("soft limit", series.soft_bytes, STATE_COLOURS["THROTTLE"]))
    for name, level, colour in levels:
        y = frame.y(level)
        body.append(f'<line class="limit" x1="{frame.left}" y1="{y:.1f}" x2="{width - frame.right}" y2="{y:.1f}" stroke="{colour}" stroke-dasharray="6 4" stroke-width="1.5"/>')
        body.append(f'<text x="{width - frame.right - 2}" y="{y - 4:.1f}" text-anchor="end" {FONT} fill="{colour}">{name} {human_bytes(level)}</text>')
    for segment in _segments(series.points):
        coordinates = " ".join(f"{frame.x(t):.1f},{frame.y(v):.1f}" for t, v in segment)
        if len(segment) == 1:
            (t, v), = segment
            body.append(f'<circle cx="{frame.x(t):.1f}" cy="{frame.y(v):.1f}" r="2" fill="{LINE_COLOUR}"/>')
        else:
            body.append(f'<polyline class="series" points="{coordinates}" fill="none" stroke="{LINE_COLOUR}" stroke-width="1.8"/>')
    lowest = min(v for _, v in series.points)
    title = f"broker {series.broker_id} · {series.log_dir}"
    body.append(f'<text x="{frame.left}" y="16" {FONT} font-size="13" font-weight="600" fill="#222">{escape(title)}</text>')
    body.append(f'<text x="{width - frame.right}" y="16" text-anchor="end" {FONT} fill="#555">lowest {human_bytes(lowest)} of {human_bytes(series.total_bytes)}</text>')
    body += frame.time_axis()
    return _svg(width, height, "volume", f"Available bytes of {title} against its limits", body)


def state_timeline_chart(buckets: Sequence[StateBucket], first: float, last: float, width: int = 1120, height: int = 120) -> str:
    """Two lanes over time: the state in force, and when the factor came from last-valid or fallback."""
    frame = _Frame(width, height, first, last, 1.0, left=110)
    lanes = (("state", 30), ("fallback / last-valid", 62))
    lane_height = 24
    body = [f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>']
    for name, y in lanes:
        body.append(f'<text x="{frame.left - 8}" y="{y + 16}" text-anchor="end" {FONT} fill="#444">{name}</text>')
        body.append(f'<rect x="{frame.left}" y="{y}" width="{width - frame.left - frame.right}" height="{lane_height}" fill="{NO_DATA_COLOUR}"/>')
    for bucket in buckets:
        x0, x1 = frame.x(bucket.start), frame.x(bucket.end)
        w = max(x1 - x0, 0.8)
        tip = f"{_time_label(bucket.start, 0)}: {bucket.state}{' (fallback/last-valid)' if bucket.fallback else ''}, {bucket.rounds} rounds"
        body.append(f'<rect class="state {bucket.state}" x="{x0:.2f}" y="{lanes[0][1]}" width="{w:.2f}" height="{lane_height}" fill="{STATE_COLOURS[bucket.state]}"><title>{escape(tip)}</title></rect>')
        if bucket.fallback:
            body.append(f'<rect class="fallback" x="{x0:.2f}" y="{lanes[1][1]}" width="{w:.2f}" height="{lane_height}" fill="{FALLBACK_COLOUR}"/>')
        else:
            body.append(f'<rect x="{x0:.2f}" y="{lanes[1][1]}" width="{w:.2f}" height="{lane_height}" fill="#cfe8d8"/>')
    legend = [*STATE_COLOURS.items(), ("fallback / last-valid", FALLBACK_COLOUR), ("no data", NO_DATA_COLOUR)]
    x = frame.left
    for name, colour in legend:
        body.append(f'<rect x="{x}" y="8" width="10" height="10" fill="{colour}"/><text x="{x + 14}" y="17" {FONT} fill="#444">{name}</text>')
        x += 24 + 7 * len(name)
    body += frame.time_axis(7)
    return _svg(width, height, "timeline", "State timeline", body)


def day_bars_chart(days: Sequence[dict], width: int = 1120, height: int = 220) -> str:
    """Hours per UTC day in OPEN / THROTTLE / PAUSE (stacked) and on the fallback (a mark)."""
    left, right, top, bottom = 72, 16, 26, 40
    plot_h = height - top - bottom
    # The scale fits the fullest day, in steps a reader can count in.
    fullest = max((d["covered_seconds"] / 3600 for d in days), default=0.0)
    scale = next((hours for hours in (0.25, 0.5, 1, 2, 4, 6, 12, 24) if fullest <= hours), 24)
    body = [f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>']
    for i in range(5):
        hours = scale * i / 4
        y = top + plot_h * (1 - hours / scale)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#eee"/>')
        body.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" {FONT} fill="#444">{hours:g} h</text>')
    slot = (width - left - right) / max(len(days), 1)
    bar = min(slot * 0.7, 48)
    for i, day in enumerate(days):
        x = left + slot * i + (slot - bar) / 2
        y = top + plot_h
        for state in ("OPEN", "THROTTLE", "PAUSE"):
            hours = day[f"{state.lower()}_seconds"] / 3600
            h = plot_h * hours / scale
            y -= h
            body.append(f'<rect class="day {state}" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="{STATE_COLOURS[state]}"><title>{day["day"]}: {state} {hours:.2f} h</title></rect>')
        fallback_hours = day["source_fallback_seconds"] / 3600
        if fallback_hours > 0:
            fy = top + plot_h * (1 - fallback_hours / scale)
            body.append(f'<line x1="{x - 3:.1f}" y1="{fy:.1f}" x2="{x + bar + 3:.1f}" y2="{fy:.1f}" stroke="{FALLBACK_COLOUR}" stroke-width="3"><title>{day["day"]}: fallback {fallback_hours:.2f} h</title></line>')
        if len(days) <= 40 or i % max(len(days) // 20, 1) == 0:
            body.append(f'<text x="{x + bar / 2:.1f}" y="{height - bottom + 16}" text-anchor="middle" {FONT} fill="#444">{str(day["day"])[5:]}</text>')
    body.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#888"/>')
    x = left
    for name, colour in [*STATE_COLOURS.items(), ("fallback (hours)", FALLBACK_COLOUR)]:
        body.append(f'<rect x="{x}" y="8" width="10" height="10" fill="{colour}"/><text x="{x + 14}" y="17" {FONT} fill="#444">{name}</text>')
        x += 24 + 7 * len(name)
    return _svg(width, height, "days", "Time per day in each state", body)
