"""The self-contained HTML page of the report: inline CSS and SVG, no script, no network.

It reads on a screen of any width and prints: the tables wrap instead of scrolling, and
printed pages are landscape with PRINT_MARGIN_MM margins."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from spark.page.backtest import backtest_sections
from spark.page.svg import VOLUME_CHART_WIDTH, day_bars_chart, state_timeline_chart, volume_chart
from spark.page.tables import END_REASONS, table_html
from spark.page.units import human_duration
from spark.report import GAP_INTERVALS, Report

PRINT_MARGIN_MM = 12
# The narrowest column of volume charts: a chart's own width and the panel's padding, so that
# a chart is never drawn smaller than its width (its text stays at the font size).
VOLUME_CHART_COLUMN = VOLUME_CHART_WIDTH + 16

_STYLE = f"""
body {{ font-family: system-ui, sans-serif; margin: 0 auto; padding: 20px 24px; max-width: 1600px; color: #222; background: #fafafa; }}
h1 {{ font-size: 22px; margin-bottom: 4px; }} h2 {{ font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }}
.meta {{ color: #555; font-size: 13px; }}
.cards {{ display: flex; gap: 12px; flex-wrap: wrap; margin: 16px 0; }}
.card {{ background: white; border: 1px solid #ddd; border-radius: 6px; padding: 10px 14px; min-width: 120px; }}
.card b {{ display: block; font-size: 20px; }} .card span {{ color: #666; font-size: 12px; }}
.grid {{ display: grid; grid-template-columns: repeat(auto-fill, minmax({VOLUME_CHART_COLUMN}px, 1fr)); gap: 12px; }}
.panel {{ background: white; border: 1px solid #ddd; border-radius: 6px; padding: 6px; }}
.panel svg {{ display: block; }}
table {{ border-collapse: collapse; font-size: 12px; background: white; width: 100%; }}
th, td {{ border: 1px solid #e2e2e2; padding: 3px 6px; vertical-align: top; }}
th {{ background: #f0f0f0; text-align: left; font-weight: 600; }}
td.num {{ text-align: right; white-space: nowrap; }}
td.time {{ text-align: left; }}
td.text {{ text-align: left; overflow-wrap: anywhere; }}
tr.ongoing td {{ background: #fdecec; }}
tr.gone td {{ color: #777; }}
.note {{ color: #666; font-size: 12px; }}
h3 {{ font-size: 14px; margin: 14px 0 6px; }}
summary {{ cursor: pointer; font-size: 14px; margin: 10px 0 6px; }}
dl {{ font-size: 12px; display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; }} dt {{ font-weight: 600; }} dd {{ margin: 0; }}
@page {{ size: landscape; margin: {PRINT_MARGIN_MM}mm; }}
@media print {{
  body {{ padding: 0; max-width: none; background: white; }}
  h2 {{ break-after: avoid; margin-top: 20px; }}
  .panel, .card, tr {{ break-inside: avoid; }}
  table {{ font-size: 10px; }}
  th, td {{ padding: 2px 4px; }}
}}
"""


def _instant(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{escape(value)}</b><span>{escape(label)}</span></div>'


def render_page(report: Report) -> str:
    counts = report.episode_counts
    gap_rule = (
        human_duration(report.max_gap_seconds)
        if report.max_gap_seconds is not None
        else f"{GAP_INTERVALS:g} x the check interval"
    )
    window = human_duration(report.forecast_window_seconds)
    cards = "".join(
        [
            _card(f"{report.rows:,}", "history rows"),
            _card(f"{report.skipped_lines:,}", "lines skipped (unreadable or of the wrong type)"),
            _card(f"{report.volumes:,}", "volumes"),
            _card(f"{counts.get('hard', 0):,}", "hard limit episodes"),
            _card(f"{counts.get('soft', 0):,}", "soft limit episodes"),
            _card(f"{counts.get('ongoing', 0):,}", "episodes still ongoing"),
            # none in a history the service writes: shown only when an older one has some
            *(
                [
                    _card(
                        f"{report.unexplained_rounds:,}",
                        "rounds in THROTTLE or PAUSE that no episode explains",
                    )
                ]
                if report.unexplained_rounds
                else []
            ),
        ]
    )
    volume_charts = "".join(
        f'<div class="panel">{volume_chart(s, report.first, report.last)}</div>'
        for s in report.series
    )

    def table(name: str) -> str:
        return table_html(name, report.tables[name], report.table_sizes[name])

    ongoing = [row for row in report.tables["episodes"] if row["ongoing"]]
    ended = [row for row in report.tables["episodes"] if not row["ongoing"]]
    ended_total = report.table_sizes["episodes"] - len(ongoing)
    reasons = "".join(
        f"<dt>{escape(reason)}</dt><dd>{escape(meaning)}</dd>"
        for reason, meaning in END_REASONS.items()
    )
    skipped = "; ".join(
        f"{escape(reason)}: {count:,}" for reason, count in report.skipped_by_reason.items()
    )

    sections = [
        "<h1>Kafka volume limits: history report</h1>",
        (
            f'<p class="meta">{_instant(report.first)} to {_instant(report.last)} · input {escape(report.input)} · '
            f"gap limit {escape(gap_rule)} · forecast window {window}</p>"
        ),
        f'<div class="cards">{cards}</div>',
        f'<p class="note">Lines skipped, by the first field that fails its check: {skipped}</p>'
        if skipped
        else "",
        "<h2>Available bytes of the volumes that came closest to the hard limit</h2>",
        f'<div class="grid">{volume_charts}</div>'
        if volume_charts
        else '<p class="note">no volume with known capacity</p>',
        "<h2>State timeline (UTC)</h2>",
        f'<div class="panel">{state_timeline_chart(report.timeline, report.first, report.last)}</div>',
        "<h2>Time per day (UTC) in each state and on the fallback</h2>",
        f'<div class="panel">{day_bars_chart(report.tables["time_in_states"])}</div>',
        table("time_in_states"),
        "<h2>Violation episodes</h2>",
        f"<h3>Still in breach at the end: {len(ongoing):,}</h3>",
        table_html("episodes", ongoing, len(ongoing)),
        f"<details><summary>Ended: {ended_total:,} episodes{' (the first ' + format(len(ended), ',') + ' shown)' if ended_total > len(ended) else ''}</summary>",
        table_html("episodes", ended, ended_total, "ended episodes"),
        "</details>",
        (
            f'<details class="legend"><summary>What the end reasons mean</summary><dl>{reasons}</dl>'
            '<p class="note">An offline log dir (the broker answers with an error such as KAFKA_STORAGE_ERROR) has no bytes: '
            "it counts as a hard breach, and its episodes show the log dir error instead of the lowest available bytes.</p></details>"
        ),
        "<h2>Fill rate and time to the hard limit</h2>",
        (
            f"<p class=\"note\">The service's own estimator: the median of the slopes across half of each volume's trend, "
            f"its observations since it last gained space (a delete, a retention run) within its last {window}; "
            "volumes no longer present have none.</p>"
        ),
        table("forecast"),
        "<h2>Brokers</h2>",
        table("brokers"),
        *backtest_sections(report.tables),
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Kafka volume limits: history report</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>'
        f"<body>{''.join(sections)}</body></html>\n"
    )
