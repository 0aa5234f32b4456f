"""The factor lifecycle of proposal 047: validity duration and fallback, judged when read."""

import pytest

from app.clock import ManualClock
from app.decision.factor import FactorSource, ThrottleFactorHolder
from app.decision.timeline import SteadyTimeline

MINUTE = 60.0


def succeed(holder: ThrottleFactorHolder, factor: float, at: float) -> None:
    """A successful round at ``at`` whose observations all expire a validity later."""
    holder.record_success(SteadyTimeline(factor, at, at + holder.validity_seconds))


def test_proposal_047_example_timeline():
    # Validity 2 minutes, fallback 0.0: success 1.0 at minute 0, failures at 1, 2, 3, success at 4.
    clock = ManualClock(0.0)
    holder = ThrottleFactorHolder(validity_seconds=2 * MINUTE, fallback=0.0, started_at=clock())
    factors = []
    succeed(holder, 1.0, clock())
    factors.append(holder.read(clock()).factor)
    for _ in range(3):
        clock.advance(MINUTE)
        holder.record_failure()
        factors.append(holder.read(clock()).factor)
    clock.advance(MINUTE)
    succeed(holder, 1.0, clock())
    factors.append(holder.read(clock()).factor)
    assert factors == [1.0, 1.0, 1.0, 0.0, 1.0]


def test_sources_follow_the_timeline():
    holder = ThrottleFactorHolder(120, 0.0, started_at=0.0)
    succeed(holder, 0.4, 0.0)
    assert holder.read(0.0).source is FactorSource.OBSERVED
    holder.record_failure()
    assert holder.read(60.0).source is FactorSource.LAST_VALID
    assert holder.read(60.0).factor == 0.4
    reading = holder.read(180.0)
    assert (reading.source, reading.factor, reading.valid_until) == (FactorSource.FALLBACK, 0.0, None)
    assert reading.computed_at == 120.0  # the fallback took over when the factor expired


def test_expiry_is_exact_to_the_boundary():
    holder = ThrottleFactorHolder(120, 0.5, started_at=0.0)
    succeed(holder, 1.0, 10.0)
    assert holder.read(130.0).source is FactorSource.OBSERVED  # exactly validity old: still valid
    assert holder.read(130.000001).source is FactorSource.FALLBACK
    assert holder.read(130.000001).factor == 0.5


def test_reads_judge_expiry_without_any_new_round():
    holder = ThrottleFactorHolder(60, 0.0, started_at=0.0)
    succeed(holder, 1.0, 0.0)
    assert holder.read(59.0).factor == 1.0
    assert holder.read(61.0).factor == 0.0


def test_start_up_grace_is_one_until_the_validity_runs_out_then_fallback():
    holder = ThrottleFactorHolder(300, 0.0, started_at=1000.0)
    reading = holder.read(1000.0)
    assert (reading.factor, reading.source, reading.next_change_at) == (1.0, FactorSource.INITIAL, 1300.0)
    holder.record_failure()
    assert holder.read(1300.0).source is FactorSource.INITIAL
    assert holder.read(1300.5).source is FactorSource.FALLBACK
    assert holder.read(1300.5).factor == 0.0


def test_success_after_fallback_restores_the_observed_factor():
    holder = ThrottleFactorHolder(60, 0.0, started_at=0.0)
    holder.record_failure()
    assert holder.read(100.0).source is FactorSource.FALLBACK
    succeed(holder, 0.7, 100.0)
    assert (holder.read(100.0).factor, holder.read(100.0).source) == (0.7, FactorSource.OBSERVED)


def test_a_known_breach_from_an_incomplete_round_caps_the_last_valid_factor():
    holder = ThrottleFactorHolder(120, 1.0, started_at=0.0)
    succeed(holder, 1.0, 0.0)
    holder.record_failure(known=SteadyTimeline(0.0, 0.0, 150.0))
    reading = holder.read(60.0)
    assert (reading.factor, reading.source, reading.next_change_at) == (0.0, FactorSource.LAST_VALID, 120.0)
    # After the last valid factor expires the cap still beats an optimistic fallback ...
    assert holder.read(130.0).factor == 0.0
    # ... until the data behind it expires too.
    assert holder.read(151.0).factor == 1.0


def test_a_success_clears_the_cap():
    holder = ThrottleFactorHolder(120, 1.0, started_at=0.0)
    holder.record_failure(known=SteadyTimeline(0.0, 0.0, 100.0))
    succeed(holder, 1.0, 10.0)
    assert holder.read(20.0).factor == 1.0


def test_disabled_observation_always_reads_one():
    holder = ThrottleFactorHolder(60, 0.0, started_at=0.0, enabled=False)
    assert holder.read(10_000.0).factor == 1.0
    assert holder.read(10_000.0).source is FactorSource.DISABLED


def test_validity_must_be_positive():
    with pytest.raises(ValueError):
        ThrottleFactorHolder(0, 1.0, started_at=0.0)


def test_the_factor_and_source_alone_are_those_of_the_full_reading_at_every_instant():
    """``factor_at`` (asked at every node report) gives what ``read`` gives of the factor and
    its source: start-up, observed, last valid, a known cap, its expiry, fallback, disabled."""
    holders = []
    holder = ThrottleFactorHolder(120, 0.5, started_at=0.0)
    holders.append(holder)
    succeed(holder, 0.25, 10.0)
    holder.record_failure(known=SteadyTimeline(0.0, 20.0, 200.0))
    capped = ThrottleFactorHolder(120, 1.0, started_at=0.0)
    capped.record_failure(known=SteadyTimeline(0.75, 5.0, 90.0))
    holders += [capped, ThrottleFactorHolder(60, 0.0, started_at=0.0, enabled=False)]
    fresh = ThrottleFactorHolder(120, 0.0, started_at=0.0)
    succeed(fresh, 0.0, 30.0)
    succeed(fresh, 1.0, 40.0)
    holders.append(fresh)
    seen = set()
    for h in holders:
        for tenth in range(0, 4000, 7):
            now = tenth / 10
            reading = h.read(now)
            assert h.factor_at(now) == (reading.factor, reading.source), now
            seen.add(reading.source)
    assert seen == set(FactorSource)  # every source was compared
