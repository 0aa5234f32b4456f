"""The page's section on the limits tried on the history (spark/analysis/backtest.py): the sets side by
side, one column each, and the volumes each set would have hit hardest."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from spark.page.tables import Cell, Row, duration, instant, number, size_and_ratio, text
from spark.page.units import human_bytes, plain_decimal
from spark.report import LIVE_LIMITS as LIVE
from spark.report import WORST_VOLUMES


def _level(kind: str | None, value: float | None) -> str:
    if value is None:
        return "none"
    return f"{value * 100:g} %" if kind == "min-available-ratio" else human_bytes(value)


def _limits(row: Row) -> Cell:
    kind = row["limit_kind"]
    if kind is None:
        return Cell("as recorded (changed over the history)", "text")
    hysteresis = "not recorded" if row["hysteresis"] is None else _level(kind, row["hysteresis"])
    shown = f"hard {_level(kind, row['hard_limit'])}, soft {_level(kind, row['soft_limit'])}, hysteresis {hysteresis}"
    exact = f"{kind} hard {plain_decimal(row['hard_limit'])}" + (
        f" soft {plain_decimal(row['soft_limit'])}" if row["soft_limit"] is not None else ""
    )
    return Cell(("as recorded: " if row["limit_set"] == LIVE else "") + shown, "text", title=exact)


MEASURES: list[tuple[str, Callable[[Row], Cell]]] = [
    ("limits", _limits),
    ("hard limit episodes", lambda r: number(r["hard_episodes"])),
    ("soft limit episodes", lambda r: number(r["soft_episodes"])),
    ("still ongoing at the end", lambda r: number(r["ongoing_episodes"])),
    ("of them, would have only (shadow mode)", lambda r: number(r["would_have_episodes"])),
    ("volumes in hard breach", lambda r: number(r["volumes_in_hard_breach"])),
    ("time in hard breach (all volumes)", lambda r: duration(r["hard_breach_seconds"])),
    ("time in THROTTLE", lambda r: duration(r["throttle_seconds"])),
    ("time in PAUSE", lambda r: duration(r["pause_seconds"])),
    ("first THROTTLE or PAUSE (UTC)", lambda r: instant(r["first_fired_at"])),
    ("first PAUSE (UTC)", lambda r: instant(r["first_pause_at"])),
]

WORST: list[tuple[str, Callable[[Row], Cell]]] = [
    ("limit set", lambda r: text(r["limit_set"])),
    ("broker", lambda r: number(r["broker_id"])),
    ("log dir", lambda r: text(r["log_dir"])),
    ("hard episodes", lambda r: number(r["hard_episodes"])),
    ("time in hard breach", lambda r: duration(r["hard_breach_seconds"])),
    ("soft episodes", lambda r: number(r["soft_episodes"])),
    ("time in soft breach", lambda r: duration(r["soft_breach_seconds"])),
    ("first breach (UTC)", lambda r: instant(r["first_breach_at"])),
    (
        "lowest available",
        lambda r: size_and_ratio(r["worst_usable_bytes"], r["worst_available_ratio"]),
    ),
]


def _side_by_side(sets: list[Row]) -> str:
    head = "<th></th>" + "".join(f"<th>{escape(row['limit_set'])}</th>" for row in sets)
    body = "".join(
        f"<tr><th>{escape(label)}</th>" + "".join(cell(row).html() for row in sets) + "</tr>"
        for label, cell in MEASURES
    )
    return f'<div class="table"><table data-table="backtest"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _worst(shown: list[Row]) -> str:
    if not shown:
        return '<p class="note">no volume breached a limit under any set</p>'
    head = "".join(f"<th>{escape(header)}</th>" for header, _ in WORST)
    body = "".join(
        "<tr>" + "".join(cell(row).html() for _, cell in WORST) + "</tr>" for row in shown
    )
    return f'<div class="table"><table data-table="backtest_volumes"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def backtest_sections(tables: dict[str, list[Row]]) -> list[str]:
    """Nothing when no set was tried (no --limits)."""
    if "backtest" not in tables:
        return []
    return [
        "<h2>Limits tried on the history</h2>",
        (
            '<p class="note">Every observation judged again under each set of limits (--limits), by the service\'s '
            f"policy; <b>{LIVE}</b> is the history as recorded. Episodes per set: backtest_episodes.csv.</p>"
        ),
        _side_by_side(tables["backtest"]),
        f"<h2>The volumes each set would have hit hardest (at most {WORST_VOLUMES} per set)</h2>",
        _worst(tables["backtest_volumes"]),
    ]
