"""What the report job hands to the page and the terminal: the figures, the first rows of each
table and the reduced chart series. Plain data, so that the job (which computes it) and the
page (which draws it) both import it and neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field

# Rows of each table shown on the HTML page (the files hold them all).
PAGE_ROWS = 200
# Default gap limit: this many check intervals (each row records the service's interval).
# Here because the analysis applies it and the page states it.
GAP_INTERVALS = 3.0
# The backtest's column of the limits recorded in the history (beside the --limits sets).
LIVE_LIMITS = "live"
# Volumes per limit set on the page, by their rank in the set (the tables hold every one).
WORST_VOLUMES = 5


@dataclass(frozen=True)
class VolumeSeries:
    broker_id: int
    log_dir: str
    total_bytes: int
    hard_bytes: float
    soft_bytes: float | None
    points: list[tuple[float, int]]  # (epoch seconds, usable bytes)


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
