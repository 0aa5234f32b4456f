"""What the HTML page shows of each table: the columns a reader needs, in units people read,
with the exact values in tooltips. (The CSV and Parquet files hold every column as computed.)

Cells are of three kinds, so that a table narrows by wrapping, never by scrolling: numbers
(right-aligned, on one line), instants (date and time, which may break between them) and
text (log dirs, which may break anywhere)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

from spark.page.units import exact_seconds, human_bytes, human_duration, plain_decimal


@dataclass(frozen=True)
class Cell:
    content: str  # plain text
    kind: str = "num"  # "num", "time" or "text": how the cell wraps and aligns
    title: str | None = None  # the exact value, as a tooltip

    def html(self) -> str:
        title = f' title="{escape(self.title)}"' if self.title else ""
        return f'<td class="{self.kind}"{title}>{escape(self.content)}</td>'


Row = dict[str, Any]
Column = tuple[str, Callable[[Row], Cell]]
EMPTY = Cell("–")


def number(value: int | None) -> Cell:
    return EMPTY if value is None else Cell(f"{value:,}")


def text(value: Any) -> Cell:
    return EMPTY if value is None else Cell(str(value), "text")


def instant(value: str | None) -> Cell:
    """A UTC instant as the job collects it (2026-03-15 00:30:30Z), the zone in the header."""
    return EMPTY if value is None else Cell(value.removesuffix("Z"), "time")


def duration(seconds: float | None) -> Cell:
    return EMPTY if seconds is None else Cell(human_duration(seconds), title=exact_seconds(seconds))


def size(value: float | None) -> Cell:
    return (
        EMPTY if value is None else Cell(human_bytes(value), title=f"{plain_decimal(value)} bytes")
    )


# A forecast without a fill rate: too few points to fit one.
_NO_TREND = Cell("–", title="fewer than two observations since the volume last gained space")


def rate(bytes_per_second: float | None, missing: Cell = EMPTY) -> Cell:
    if bytes_per_second is None:
        return missing
    exact = f"{plain_decimal(bytes_per_second)} bytes/s"
    if bytes_per_second == 0:
        return Cell("flat", title=exact)
    sign = "−" if bytes_per_second < 0 else ""
    return Cell(f"{sign}{human_bytes(abs(bytes_per_second))}/s", title=exact)


def size_and_ratio(value: float | None, ratio: float | None) -> Cell:
    if value is None:
        return EMPTY
    shown = human_bytes(value) + (f" ({ratio * 100:.1f} %)" if ratio is not None else "")
    exact = f"{plain_decimal(value)} bytes" + (
        f", ratio {plain_decimal(ratio)}" if ratio is not None else ""
    )
    return Cell(shown, title=exact)


def _limit(row: Row) -> Cell:
    level = row["level"]
    if row["limit_kind"] == "min-available-ratio":
        shown = f"{level * 100:g} %"
    else:
        shown = human_bytes(level) if level is not None else "?"
    # Begun while the service was in shadow mode: decided and recorded, never applied.
    would_have = " (would have)" if row.get("enforced") is False else ""
    # A metadata log volume's episode: its limit is the metadata limit, and it held back partition mutations.
    metadata = " metadata" if "metadata" in (row.get("holds") or "") else ""
    return Cell(
        f"{row['limit']}{metadata} {shown}{would_have}",
        title=f"{row['limit_kind']} {plain_decimal(level) if level is not None else ''}".strip(),
    )


def _time_to_limit(row: Row) -> Cell:
    seconds = row["seconds_to_hard_limit"]
    if seconds is None:
        return Cell("–", title="not filling")
    if seconds == 0:
        return Cell("reached", title="at or below the hard limit at the last observation")
    return duration(seconds)


def _trend(row: Row) -> Cell:
    points, seconds = row["trend_observations"], row["trend_seconds"]
    return Cell(
        f"{points:,} points over {human_duration(seconds)}",
        title=f"observations since {row['trend_start']}, {exact_seconds(seconds)}",
    )


# What each end reason of an episode means, for the page's legend and the cells' tooltips.
END_REASONS = {
    "ongoing": "still in breach at the last observation, which is within the gap limit of the end of the history",
    "unobserved": "in breach at the last round that observed volumes; the history ends in rounds that observed none (the cluster unreachable)",
    "recovered": "back within the limit at the end",
    "limit-changed": "the limit's kind or level changed, or the soft limit was removed (a restart with new settings); a new episode starts there if still in breach",
    "unjudged": "the next observation had no usable bytes (not reported), so it ends at the last observation in breach",
    "gap": "the next observation came later than the gap limit; it ends at the last observation in breach",
    "volume-gone": "the volume was never observed again while other volumes were (its broker or log dir left)",
    "back-with-room": "a kept observation in breach (its broker fenced or not answering) until the broker answered again within the limit",
    "unregistered": "a kept observation in breach until its broker was no longer registered, and the volume left the view",
    "expired": "a kept observation in breach until it outlived the validity duration (fenced brokers under expire), and the volume left the view",
}


def _end_reason(row: Row) -> Cell:
    reason = row["end_reason"]
    return EMPTY if reason is None else Cell(reason, "text", title=END_REASONS.get(reason))


def _lowest(row: Row) -> Cell:
    """The lowest available bytes; an offline log dir has none, and says so."""
    if row["worst_usable_bytes"] is None and row.get("log_dir_error"):
        return Cell(
            f"log dir error: {row['log_dir_error']}",
            "text",
            title="the broker reported the log dir offline; it counts as a hard breach",
        )
    return size_and_ratio(row["worst_usable_bytes"], row["worst_available_ratio"])


EPISODES: list[Column] = [
    ("broker", lambda r: number(r["broker_id"])),
    ("log dir", lambda r: text(r["log_dir"])),
    ("limit", _limit),
    ("start (UTC)", lambda r: instant(r["start"])),
    ("end (UTC)", lambda r: instant(r["end"])),
    ("duration", lambda r: duration(r["duration_seconds"])),
    ("end reason", _end_reason),
    ("lowest available", _lowest),
    ("observations", lambda r: number(r["observations"])),
]

TIME_IN_STATES: list[Column] = [
    ("day (UTC)", lambda r: Cell(str(r["day"]), "time")),
    ("rounds", lambda r: number(r["rounds"])),
    ("incomplete rounds", lambda r: number(r["incomplete_rounds"])),
    ("observed for", lambda r: duration(r["covered_seconds"])),
    ("OPEN", lambda r: duration(r["open_seconds"])),
    ("THROTTLE", lambda r: duration(r["throttle_seconds"])),
    ("PAUSE", lambda r: duration(r["pause_seconds"])),
    ("factor observed", lambda r: duration(r["source_observed_seconds"])),
    ("last-valid", lambda r: duration(r["source_last_valid_seconds"])),
    ("fallback", lambda r: duration(r["source_fallback_seconds"])),
    ("initial", lambda r: duration(r["source_initial_seconds"])),
]

FORECAST: list[Column] = [
    ("broker", lambda r: number(r["broker_id"])),
    ("log dir", lambda r: text(r["log_dir"])),
    ("available", lambda r: size(r["usable_bytes"])),
    ("hard limit", lambda r: size(r["hard_limit_bytes"])),
    ("fill rate", lambda r: rate(r["fill_rate_bytes_per_second"], missing=_NO_TREND)),
    ("fitted on", _trend),
    ("time to the hard limit", _time_to_limit),
    ("projected (UTC)", lambda r: instant(r["projected_at"])),
    ("last observed (UTC)", lambda r: instant(r["last_observed"])),
]

BROKERS: list[Column] = [
    ("broker", lambda r: number(r["broker_id"])),
    ("log dirs", lambda r: number(r["log_dirs"])),
    ("first seen (UTC)", lambda r: instant(r["first_seen"])),
    ("last seen (UTC)", lambda r: instant(r["last_seen"])),
    ("at the end", lambda r: text("present" if r["present_at_end"] else "gone")),
    ("lowest available", lambda r: size_and_ratio(r["min_usable_bytes"], r["min_available_ratio"])),
    ("episodes hard / soft", lambda r: Cell(f"{r['hard_episodes']:,} / {r['soft_episodes']:,}")),
    ("ongoing", lambda r: number(r["ongoing_episodes"])),
    ("time in hard breach", lambda r: duration(r["hard_breach_seconds"])),
    ("time in soft breach", lambda r: duration(r["soft_breach_seconds"])),
    ("time fenced", lambda r: duration(r.get("fenced_seconds"))),
    ("soonest hard limit (UTC)", lambda r: instant(r["soonest_hard_limit_at"])),
    ("fastest fill rate", lambda r: rate(r["fastest_fill_rate_bytes_per_second"])),
]

PAGE_COLUMNS: dict[str, list[Column]] = {
    "episodes": EPISODES,
    "time_in_states": TIME_IN_STATES,
    "forecast": FORECAST,
    "brokers": BROKERS,
}


def row_class(name: str, row: Row) -> str:
    if name == "episodes" and row.get("ongoing"):
        return "ongoing"
    if name == "brokers" and not row.get("present_at_end", True):
        return "gone"
    return ""


def table_html(name: str, rows: list[Row], total: int, what: str = "rows") -> str:
    if not rows:
        return '<p class="note">none</p>'
    columns = PAGE_COLUMNS[name]
    head = "".join(f"<th>{escape(header)}</th>" for header, _ in columns)
    body = "".join(
        f'<tr class="{row_class(name, row)}">'
        + "".join(cell(row).html() for _, cell in columns)
        + "</tr>"
        for row in rows
    )
    note = (
        f'<p class="note">showing {len(rows):,} of {total:,} {what}; all are in {name}.csv and parquet/{name}/</p>'
        if total > len(rows)
        else ""
    )
    return f'<div class="table"><table data-table="{name}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{note}'
