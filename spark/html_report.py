"""The self-contained HTML page of the report: inline CSS and SVG, no script, no network."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING, Any

from spark.gaps import GAP_INTERVALS
from spark.svg import day_bars_chart, human_bytes, state_timeline_chart, volume_chart

if TYPE_CHECKING:
    from spark.job import Report

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1180px; color: #222; background: #fafafa; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta { color: #555; font-size: 13px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 16px 0; }
.card { background: white; border: 1px solid #ddd; border-radius: 6px; padding: 10px 14px; min-width: 120px; }
.card b { display: block; font-size: 20px; } .card span { color: #666; font-size: 12px; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.panel { background: white; border: 1px solid #ddd; border-radius: 6px; padding: 6px; }
table { border-collapse: collapse; font-size: 12px; background: white; width: 100%; }
th, td { border: 1px solid #e2e2e2; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; } td.text { text-align: left; }
tr.ongoing td { background: #fdecec; }
.scroll { overflow-x: auto; }
.note { color: #666; font-size: 12px; }
"""


def _instant(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "<td></td>"
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if name.endswith("_seconds") and isinstance(value, (int, float)):
        return f'<td title="{value}">{human_duration(value)}</td>'
    if name.endswith("_bytes_per_second") and isinstance(value, (int, float)):
        return f"<td>{human_bytes(value)}/s</td>"
    if (name.endswith("_bytes") or name == "level" and isinstance(value, float) and value > 1) and isinstance(value, (int, float)):
        return f'<td title="{value}">{human_bytes(value)}</td>'
    if isinstance(value, float):
        return f"<td>{value:.4f}</td>"
    if isinstance(value, int):
        return f"<td>{value:,}</td>"
    return f'<td class="text">{escape(str(value))}</td>'


def _table(rows: list[dict], total: int) -> str:
    if not rows:
        return '<p class="note">none</p>'
    names = list(rows[0])
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    body = "".join(
        f'<tr class="{"ongoing" if row.get("ongoing") else ""}">' + "".join(_cell(n, row[n]) for n in names) + "</tr>" for row in rows
    )
    note = f'<p class="note">showing {len(rows):,} of {total:,} rows; all are in the CSV and Parquet files</p>' if total > len(rows) else ""
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>{note}'


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{escape(value)}</b><span>{escape(label)}</span></div>'


def render_page(report: Report) -> str:
    counts = report.episode_counts
    gap_rule = f"{report.max_gap_seconds:g} s" if report.max_gap_seconds is not None else f"{GAP_INTERVALS:g} x the check interval"
    cards = "".join(
        [
            _card(f"{report.rows:,}", "history rows"),
            _card(f"{report.skipped_lines:,}", "corrupt / truncated lines skipped"),
            _card(f"{report.volumes:,}", "volumes"),
            _card(f"{counts.get('hard', 0):,}", "hard limit episodes"),
            _card(f"{counts.get('soft', 0):,}", "soft limit episodes"),
            _card(f"{counts.get('ongoing', 0):,}", "episodes still ongoing"),
        ]
    )
    volume_charts = "".join(f'<div class="panel">{volume_chart(s, report.first, report.last)}</div>' for s in report.series)
    sections = [
        "<h1>Kafka volume limits: history report</h1>",
        f'<p class="meta">{_instant(report.first)} to {_instant(report.last)} · input {escape(report.input)} · '
        f"gap limit {escape(gap_rule)} · forecast window {human_duration(report.forecast_window_seconds)}</p>",
        f'<div class="cards">{cards}</div>',
        "<h2>Available bytes of the volumes that came closest to the hard limit</h2>",
        f'<div class="grid">{volume_charts}</div>' if volume_charts else '<p class="note">no volume with known capacity</p>',
        "<h2>State timeline</h2>",
        f'<div class="panel">{state_timeline_chart(report.timeline, report.first, report.last)}</div>',
        "<h2>Time per day (UTC) in THROTTLE, PAUSE and on the fallback</h2>",
        f'<div class="panel">{day_bars_chart(report.tables["time_in_states"])}</div>',
        _table(report.tables["time_in_states"], report.table_sizes["time_in_states"]),
        "<h2>Violation episodes</h2>",
        _table(report.tables["episodes"], report.table_sizes["episodes"]),
        f"<h2>Fill rate and time to the hard limit (least squares over the last {human_duration(report.forecast_window_seconds)} of each volume)</h2>",
        _table(report.tables["forecast"], report.table_sizes["forecast"]),
        "<h2>Brokers</h2>",
        _table(report.tables["brokers"], report.table_sizes["brokers"]),
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Kafka volume limits: history report</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>'
        f'<body>{"".join(sections)}</body></html>\n'
    )
