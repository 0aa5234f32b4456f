"""What the report job hands to the page and the terminal: the figures, the first rows of each
table and the reduced chart series. Plain data, so that the job (which computes it) and the
page (which draws it) both import it and neither imports the other."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import date

# Rows of each table shown on the HTML page (the files hold them all).
PAGE_ROWS = 200
# Default gap limit: this many check intervals (each row records the service's interval).
# Here because the analysis applies it and the page states it.
GAP_INTERVALS = 3.0
# The backtest's column of the limits recorded in the history (beside the --limits sets).
LIVE_LIMITS = "live"
# Volumes per limit set on the page, by their rank in the set (the tables hold every one).
WORST_VOLUMES = 5


# A limit over time: (epoch seconds, level in bytes) from which each level was in force, in
# order; a level of None: no such limit from then on (a soft limit removed).
Steps = list[tuple[float, float | None]]


@dataclass(frozen=True)
class VolumeSeries:
    broker_id: int
    log_dir: str
    total_bytes: int
    hard: Steps
    soft: Steps
    points: list[tuple[float, int]]  # (epoch seconds, usable bytes)
    # Where the fill forecast reaches the hard limit: (epoch seconds, bytes), drawn from the
    # last point; None when the volume is not filling towards it.
    projected: tuple[float, float] | None = None

    @property
    def hard_bytes(self) -> float:
        """The hard limit in force at the end."""
        return next((level for _, level in reversed(self.hard) if level is not None), 0.0)

    @property
    def soft_bytes(self) -> float | None:
        """The soft limit in force at the end, if any."""
        return self.soft[-1][1] if self.soft else None


@dataclass(frozen=True)
class StateBucket:
    start: float
    end: float
    state: str  # the worst state of the bucket
    fallback: bool  # the fallback or last-valid factor was in force at some round of the bucket
    rounds: int


@dataclass
class Report:
    input: str
    output: str
    rows: int
    skipped_lines: int
    first: float
    last: float
    max_gap_seconds: float | None
    forecast_window_seconds: float
    volumes: int = 0
    episode_counts: dict[str, int] = field(default_factory=dict)  # hard, soft, ongoing
    tables: dict[str, list[dict]] = field(default_factory=dict)  # the first PAGE_ROWS rows of each
    table_sizes: dict[str, int] = field(default_factory=dict)
    series: list[VolumeSeries] = field(default_factory=list)
    timeline: list[StateBucket] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # time per step
    # Rounds in THROTTLE or PAUSE on the volumes' factor that no open episode explains (none
    # in a history the service writes), and the first few of them.
    unexplained_rounds: int = 0
    unexplained_examples: list[dict] = field(default_factory=list)
    skipped_by_reason: dict[str, int] = field(
        default_factory=dict
    )  # "unreadable" or "<field>: <problem>", most first
    parsed_days: tuple[str, ...] = ()  # with a cache: the days parsed in this run
    reused_days: tuple[str, ...] = ()  # and those read from the cache


# A Report as JSON, for the cache to keep (``reading.reuse``): the dates of the tables' rows
# (days) tagged, so that they come back as dates.
_DATE = "$date"


def report_json(report: Report) -> str:
    def tagged(value: object) -> object:
        if isinstance(value, date):
            return {_DATE: value.isoformat()}
        raise TypeError(f"{type(value).__name__} is not kept in a report's JSON")

    return json.dumps(asdict(report), default=tagged)


def report_from_json(text: str) -> Report:
    """The Report ``report_json`` wrote."""

    def untagged(value: dict) -> object:
        return date.fromisoformat(value[_DATE]) if set(value) == {_DATE} else value

    fields = json.loads(text, object_hook=untagged)
    steps = lambda levels: [tuple(step) for step in levels]  # noqa: E731
    fields["series"] = [
        VolumeSeries(
            **{
                **series,
                "hard": steps(series["hard"]),
                "soft": steps(series["soft"]),
                "points": steps(series["points"]),
                "projected": tuple(series["projected"]) if series["projected"] else None,
            }
        )
        for series in fields["series"]
    ]
    fields["timeline"] = [StateBucket(**bucket) for bucket in fields["timeline"]]
    for name in ("parsed_days", "reused_days"):
        fields[name] = tuple(fields[name])
    return Report(**fields)
