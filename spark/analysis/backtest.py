"""Limits tried on the past (backtest): the history judged again under candidate sets of limits.

Each candidate set (``throttle-report --limits FILE``) re-judges every observation of the
history (usable and total bytes per volume per round) as the service's policy
(app/decision/policy.py) would have, in Spark's own functions: a log dir with an error
breaches; one without capacity figures is unjudged; otherwise the measure (usable bytes, or
usable / total with 0 for a capacity of 0) breaches at or below the hard level, ramps
linearly between the hard and the soft level, and is ok above. Hysteresis is the service's
memory of a volume's breach: a volume that breached stays breaching while its measure is at
or below hard + hysteresis; here the memory runs along the volume's own observations in time
and is forgotten across a gap (as across a restart of the service).

A round's state under a candidate set follows from the factors its volumes ask for, as the
service's factor lifecycle would have made it: an ``observed`` or ``initial`` round is in the
state of the lowest factor of its volumes (OPEN when it observed none); a ``last-valid`` round
in the lower of that and the last observed round's; a ``fallback`` round keeps its recorded
state (the fallback factor does not depend on the limits).

Then the episodes (spark/analysis/episodes.py) and the time in states (spark/analysis/states.py) are computed
from the re-judged rows by the report's own code. The ``live`` set is the history as recorded:
the plain report's episodes and time in states, unchanged."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from app.decision.policy import LimitKind, State, StoragePolicy
from spark.analysis.episodes import VOLUME, violation_episodes
from spark.analysis.gaps import HistoryEnd, gap_limit
from spark.analysis.states import time_in_states
from spark.reading.frames import kept
from spark.reading.history import epoch_seconds
from spark.report import LIVE_LIMITS as LIVE
from spark.report import WORST_VOLUMES

TABLES = ("backtest", "backtest_episodes", "backtest_volumes")
_FACTOR = "volume_factor"


@dataclass(frozen=True)
class LimitSet:
    name: str
    policy: StoragePolicy


class LimitSetError(ValueError):
    """A limits file the service would refuse; one line per problem."""


def read_limit_set(path: Path) -> LimitSet:
    """The set of limits of a properties file, named after the file (its stem), read and
    checked by the service's own settings code (the keys of docs/configuration.md)."""
    # Imported here: the report needs the service's settings code (pydantic) only with --limits.
    from app.settings.limits import storage_policy
    from app.settings.loading import ConfigurationError, load_limits

    try:
        settings = load_limits(path)
    except ConfigurationError as exc:
        raise LimitSetError(str(exc)) from None
    return LimitSet(path.stem, storage_policy(settings))


def name_problems(names: list[str]) -> list[str]:
    """What is wrong with the sets' names (each set is named after its file), one line each."""
    problems = (
        [f"--limits {LIVE}: the name {LIVE!r} is the recorded limits' column; rename the file"]
        if LIVE in names
        else []
    )
    return problems + [
        f"--limits: two files named {name!r}; each set is named after its file"
        for name in sorted({n for n in names if names.count(n) > 1})
    ]


def check_names(sets: list[LimitSet]) -> None:
    problems = name_problems([s.name for s in sets])
    if problems:
        raise LimitSetError("\n".join(problems))


def read_limit_sets(paths: list[Path]) -> list[LimitSet]:
    """The sets of every file, or LimitSetError with every problem of every file and of their
    names, one line each (a file's problems do not hide the next file's)."""
    sets, problems = [], name_problems([path.stem for path in paths])
    for path in paths:
        try:
            sets.append(read_limit_set(path))
        except LimitSetError as exc:
            problems += str(exc).splitlines()
    if problems:
        raise LimitSetError("\n".join(problems))
    return sets


# --- the policy, in Spark's functions ---


def _measure(policy: StoragePolicy) -> Column:
    usable, total = F.col("usable_bytes").cast("double"), F.col("total_bytes")
    if policy.kind is LimitKind.MIN_AVAILABLE_BYTES:
        return usable
    return F.when(total > 0, usable / total.cast("double")).otherwise(F.lit(0.0))


def _after_gap(max_gap_seconds: float | None) -> Column:
    """No earlier observation of the volume within the gap limit: nothing is remembered."""
    by_volume = Window.partitionBy(*VOLUME).orderBy("time")
    previous = F.lag(epoch_seconds("time")).over(by_volume)
    return previous.isNull() | ((epoch_seconds("time") - previous) > gap_limit(max_gap_seconds))


def judged_rows(policy: StoragePolicy, max_gap_seconds: float | None = None):
    """The history's rows with the limit columns and verdicts they would have had under
    ``policy``: ``limit_kind``, ``hard_limit``, ``soft_limit``, ``volume_status`` and
    ``volume_factor`` (the factor the volume asks for, with the policy's arithmetic). Rows of
    rounds that observed no volume keep a null verdict."""
    hard, soft = float(policy.hard_level), policy.soft_level
    measure = _measure(policy)
    is_volume = F.col("broker_id").isNotNull() & F.col("log_dir").isNotNull()
    failed = F.col("log_dir_error").isNotNull()
    # A value that is not there (null) is as unreported as -1.
    unjudged = ~(
        F.coalesce(F.col("total_bytes") >= 0, F.lit(False))
        & F.coalesce(F.col("usable_bytes") >= 0, F.lit(False))
    )
    at_hard = measure <= F.lit(hard)

    def step(rows: DataFrame) -> DataFrame:
        if policy.hysteresis > 0:
            # A latch per volume: set at or below the hard level (or by an error), cleared above
            # hard + hysteresis (or unjudged, or after a gap), else as it was: the last event
            # that set or cleared it, over the volume's observations in time.
            within_release = measure <= F.lit(hard + policy.hysteresis)
            event = (
                F.when(failed | (~unjudged & at_hard), F.lit(True))
                .when(unjudged | ~within_release, F.lit(False))
                .when(_after_gap(max_gap_seconds), F.lit(False))
            )
            so_far = (
                Window.partitionBy(*VOLUME)
                .orderBy("time")
                .rowsBetween(Window.unboundedPreceding, Window.currentRow)
            )
            rows = rows.withColumn(
                "_breaching", F.coalesce(F.last(event, ignorenulls=True).over(so_far), F.lit(False))
            )
            breaching = F.col("_breaching")
        else:
            breaching = failed | (~unjudged & at_hard)
        ramping = F.lit(False) if soft is None else measure <= F.lit(float(soft))
        status = (
            F.when(~is_volume, F.lit(None))
            .when(failed, F.lit("breaching"))
            .when(unjudged, F.lit("unjudged"))
            .when(breaching, F.lit("breaching"))
            .when(ramping, F.lit("ramping"))
            .otherwise(F.lit("ok"))
        )
        ramp = (
            F.lit(1.0)
            if soft is None
            else F.least(F.lit(1.0), (measure - F.lit(hard)) / F.lit(float(soft) - hard))
        )
        factor = (
            F.when(~is_volume, F.lit(None))
            .when(failed | (~unjudged & breaching), F.lit(0.0))
            .when(~unjudged & ramping, ramp)
            .otherwise(F.lit(1.0))
        )
        return rows.withColumns(
            {
                "limit_kind": F.lit(policy.kind.value),
                "hard_limit": F.lit(hard),
                "soft_limit": F.lit(None).cast("double") if soft is None else F.lit(float(soft)),
                "volume_status": status,
                _FACTOR: factor.cast("double"),
            }
        ).drop("_breaching")

    return step


def _state_of(factor: Column) -> Column:
    """app.decision.policy.State.of, in Spark."""
    return (
        F.when(factor >= 1.0, F.lit(State.OPEN.value))
        .when(factor <= 0.0, F.lit(State.PAUSE.value))
        .otherwise(F.lit(State.THROTTLE.value))
    )


def judged_rounds(judged: DataFrame) -> DataFrame:
    """One row per round (as ``states.rounds``) in the state the round would have had under
    the limits ``judged`` was judged by (``judged_rows``)."""
    per_round = judged.groupBy("time").agg(
        F.max("source").alias("source"),
        F.max("state").alias("recorded_state"),
        F.coalesce(F.min(_FACTOR), F.lit(1.0)).alias("own_factor"),
        F.max("check_interval_seconds").alias("check_interval_seconds"),
        F.max("round_complete").alias("round_complete"),
    )
    in_order = Window.orderBy("time").rowsBetween(
        Window.unboundedPreceding, -1
    )  # rounds are few: one partition
    last_observed = F.last(
        F.when(F.col("source") == "observed", F.col("own_factor")), ignorenulls=True
    ).over(in_order)
    factor = F.when(
        F.col("source") == "last-valid",
        F.least(F.col("own_factor"), F.coalesce(last_observed, F.lit(1.0))),
    ).otherwise(F.col("own_factor"))
    state = F.when(F.col("source") == "fallback", F.col("recorded_state")).otherwise(
        _state_of(factor)
    )
    return per_round.select(
        "time", state.alias("state"), "source", "check_interval_seconds", "round_complete"
    )


# --- the tables ---


@dataclass(frozen=True)
class Outcome:
    """What one set of limits gives over the history."""

    episodes: DataFrame
    round_rows: DataFrame  # one row per round: time, state, source, ...


def _first_round_in(*states: str) -> Column:
    return F.min(F.when(F.col("state").isin(*states), F.col("time")))


def _summary(
    name: str,
    limits: StoragePolicy | None,
    outcome: Outcome,
    max_gap_seconds: float | None,
    live_limits: DataFrame,
) -> DataFrame:
    days = time_in_states(outcome.round_rows, max_gap_seconds).agg(
        F.coalesce(F.sum("throttle_seconds"), F.lit(0.0)).alias("throttle_seconds"),
        F.coalesce(F.sum("pause_seconds"), F.lit(0.0)).alias("pause_seconds"),
    )
    fired = outcome.round_rows.agg(
        _first_round_in(State.THROTTLE.value, State.PAUSE.value).alias("first_fired_at"),
        _first_round_in(State.PAUSE.value).alias("first_pause_at"),
    )
    hard = F.col("limit") == "hard"
    counts = outcome.episodes.agg(
        F.count(F.when(hard, 1)).alias("hard_episodes"),
        F.count(F.when(~hard, 1)).alias("soft_episodes"),
        F.count(F.when(F.col("ongoing"), 1)).alias("ongoing_episodes"),
        F.count(F.when(F.col("enforced") == F.lit(False), 1)).alias("would_have_episodes"),
        F.count_distinct(F.when(hard, F.struct(*VOLUME))).alias("volumes_in_hard_breach"),
        F.coalesce(F.sum(F.when(hard, F.col("duration_seconds"))), F.lit(0.0)).alias(
            "hard_breach_seconds"
        ),
    )
    if limits is None:
        levels = live_limits
    else:
        levels = live_limits.sparkSession.range(1).select(
            F.lit(limits.kind.value).alias("limit_kind"),
            F.lit(float(limits.hard_level)).alias("hard_limit"),
            F.lit(limits.soft_level).cast("double").alias("soft_limit"),
            F.lit(float(limits.hysteresis)).alias("hysteresis"),
        )
    return (
        levels.crossJoin(counts)
        .crossJoin(days)
        .crossJoin(fired)
        .select(F.lit(name).alias("limit_set"), "*")
    )


def _recorded_limits(rows: DataFrame) -> DataFrame:
    """The live set's levels: the recorded ones when one setting held throughout, else null
    (the episodes carry each level); the hysteresis is not recorded."""
    settings = rows.select("limit_kind", "hard_limit", "soft_limit").distinct()
    return settings.agg(
        F.when(F.count(F.lit(1)) == 1, F.first("limit_kind")).alias("limit_kind"),
        F.when(F.count(F.lit(1)) == 1, F.first("hard_limit")).alias("hard_limit"),
        F.when(F.count(F.lit(1)) == 1, F.first("soft_limit")).alias("soft_limit"),
        F.lit(None).cast("double").alias("hysteresis"),
    )


def _per_volume(name: str, episodes: DataFrame) -> DataFrame:
    hard = F.col("limit") == "hard"
    hardest_first = Window.orderBy(
        F.desc("hard_breach_seconds"), F.desc("soft_breach_seconds"), *VOLUME
    )
    return (
        episodes.groupBy(*VOLUME)
        .agg(
            F.count(F.when(hard, 1)).alias("hard_episodes"),
            F.count(F.when(~hard, 1)).alias("soft_episodes"),
            F.coalesce(F.sum(F.when(hard, F.col("duration_seconds"))), F.lit(0.0)).alias(
                "hard_breach_seconds"
            ),
            F.coalesce(F.sum(F.when(~hard, F.col("duration_seconds"))), F.lit(0.0)).alias(
                "soft_breach_seconds"
            ),
            F.min("start").alias("first_breach_at"),
            F.min("worst_usable_bytes").alias("worst_usable_bytes"),
            F.min("worst_available_ratio").alias("worst_available_ratio"),
        )
        .select(
            F.lit(name).alias("limit_set"), F.row_number().over(hardest_first).alias("rank"), "*"
        )
    )


def backtest(
    rows: DataFrame,
    volumes: DataFrame,
    end: HistoryEnd,
    live: Outcome,
    limit_sets: list[LimitSet],
    max_gap_seconds: float | None = None,
    episode_steps=lambda episodes: episodes,
    cached: list[DataFrame] | None = None,
) -> dict[str, DataFrame]:
    """The tables of TABLES, the live set first, then each set in the order given.
    ``live``: the plain report's episodes and rounds; ``episode_steps``: what the job does
    to its episodes after ``violation_episodes`` (so every set's episodes have its columns);
    ``cached`` receives the frames persisted here, for the caller to unpersist."""
    cached = [] if cached is None else cached
    outcomes: list[tuple[str, StoragePolicy | None, Outcome]] = [(LIVE, None, live)]
    for limit_set in limit_sets:
        judged = rows.transform(judged_rows(limit_set.policy, max_gap_seconds))
        # Each set's episodes and rounds feed three tables: computed once (they are small).
        episodes = kept(
            episode_steps(violation_episodes(judged, volumes, end, max_gap_seconds)), cached
        )
        outcomes.append(
            (
                limit_set.name,
                limit_set.policy,
                Outcome(episodes, kept(judged_rounds(judged), cached)),
            )
        )
    recorded = _recorded_limits(rows)
    order = {name: index for index, (name, _, _) in enumerate(outcomes)}
    set_order = F.element_at(
        F.create_map(*[F.lit(x) for name, i in order.items() for x in (name, i)]),
        F.col("limit_set"),
    )

    def union(tables: list[DataFrame]) -> DataFrame:
        return functools.reduce(DataFrame.unionByName, tables)

    summary = union(
        [
            _summary(name, policy, outcome, max_gap_seconds, recorded)
            for name, policy, outcome in outcomes
        ]
    )
    episodes = union(
        [
            outcome.episodes.select(F.lit(name).alias("limit_set"), "*")
            for name, _, outcome in outcomes
        ]
    )
    per_volume = union([_per_volume(name, outcome.episodes) for name, _, outcome in outcomes])
    return {
        "backtest": summary.orderBy(set_order),
        "backtest_episodes": episodes.orderBy(set_order, *VOLUME, "limit", "start"),
        "backtest_volumes": per_volume.orderBy(set_order, "rank"),
    }


def page_view(name: str, rows: list[dict]) -> list[dict]:
    """What the page shows of a table's rows: the worst volumes of each set, every row of the others."""
    return (
        [row for row in rows if row["rank"] <= WORST_VOLUMES]
        if name == "backtest_volumes"
        else rows
    )
