"""/metrics follows Prometheus' conventions: promtool's lint finds nothing, the process and
platform metrics are there, no ``*_created`` series, the state is a state set, log dirs without
capacity figures export no bytes, and the decision's limits, validity and latest successful
round can be written into rules. The rules themselves: test_alert_rules.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.observation.model import ObservationRound, VolumeObservation
from app.server.runtime.metrics import REVISION_VARIABLE
from devtools.commands import run_command

from ..promtools import promtool
from .exposition import RATIO_LIMITS, busy_service, every_kind_of_volume, parse, scrape_after, value

ROOT = Path(__file__).resolve().parents[2]
START = 1_700_000_000.0  # ManualClock's start: the app is created at this instant


def test_promtool_finds_nothing_and_the_process_platform_and_build_metrics_are_there():
    text = scrape_after(busy_service)
    checked = promtool("check", "metrics", stdin=text)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")
    samples = parse(text)
    names = {name for name, _ in samples}
    assert {"process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds", "python_info"} <= names
    assert any(name.startswith("python_gc_") for name in names)
    versions = [dict(labels)["version"] for name, labels in samples if name == "kafka_throttle_build_info"]
    assert versions == ["0.1.0"]
    assert [name for name in names if name.endswith("_created")] == []


def test_the_state_is_a_state_set_with_exactly_the_state_in_force_set():
    def states(text: str) -> dict[str, float]:
        return {dict(labels)["kafka_throttle_state"]: v for (name, labels), v in parse(text).items() if name == "kafka_throttle_state"}

    async def ramping(client, loop, clock):
        now = clock()
        loop.apply_round(ObservationRound(now, now, (1,), (VolumeObservation(1, "/a", 1000, 200, now),)))

    async def breaching(client, loop, clock):
        now = clock()
        loop.apply_round(ObservationRound(now, now, (1,), (VolumeObservation(1, "/a", 1000, 50, now),)))

    assert states(scrape_after(ramping)) == {"OPEN": 0.0, "THROTTLE": 1.0, "PAUSE": 0.0}
    assert states(scrape_after(breaching)) == {"OPEN": 0.0, "THROTTLE": 0.0, "PAUSE": 1.0}


def test_log_dirs_without_capacity_figures_export_no_bytes_and_are_counted():
    samples = parse(scrape_after(busy_service))
    brokers = {
        dict(labels)["broker_id"]
        for name, labels in samples
        if name in ("kafka_throttle_volume_available_bytes", "kafka_throttle_volume_total_bytes")
    }
    assert brokers == {"1", "4"}, "brokers 2 (no figures, -1) and 3 (offline) must not look like full volumes"
    assert all(v >= 0 for (name, _), v in samples.items() if name.startswith("kafka_throttle_volume_"))
    assert value(samples, "kafka_throttle_unjudged_log_dirs") == 1.0
    assert value(samples, "kafka_throttle_offline_log_dirs") == 1.0
    assert value(samples, "kafka_throttle_active_log_dirs") == 4.0


def test_limits_validity_and_the_latest_successful_round_are_exported_through_failures_and_the_fallback():
    seen: dict[str, dict] = {}

    async def lifecycle(client, loop, clock):
        seen["before any round"] = parse((await client.get("/metrics")).text)
        loop.apply_round(every_kind_of_volume(clock()))
        seen["observed"] = parse((await client.get("/metrics")).text)
        clock.advance(30)
        loop.apply_round(ObservationRound(clock(), clock(), error="DescribeCluster failed: timeout"))
        seen["failed"] = parse((await client.get("/metrics")).text)
        clock.advance(100)  # 130 s after the success: the 2-minute validity has run out
        loop.publisher.publish()
        seen["fallback"] = parse((await client.get("/metrics")).text)
        clock.advance(5)
        loop.apply_round(every_kind_of_volume(clock()))

    after = parse(scrape_after(lifecycle))
    last_success = "kafka_throttle_last_successful_round_timestamp_seconds"
    valid_until = "kafka_throttle_factor_valid_until_timestamp_seconds"
    for samples in (*seen.values(), after):
        assert value(samples, "kafka_throttle_limit_min_available_bytes", limit="hard") == 100.0
        assert value(samples, "kafka_throttle_limit_min_available_bytes", limit="soft") == 300.0
        assert value(samples, "kafka_throttle_factor_validity_seconds") == 120.0
    assert value(seen["before any round"], last_success) == START  # the initial factor's start
    assert value(seen["before any round"], valid_until) == START + 120
    assert value(seen["observed"], last_success) == START
    assert value(seen["observed"], valid_until) == START + 120
    assert value(seen["failed"], last_success) == START, "a failed round is no success"
    assert value(seen["failed"], "kafka_throttle_admin_connected") == 0.0
    assert value(seen["fallback"], last_success) == START
    assert value(seen["fallback"], valid_until) is None, "the fallback has no expiry"
    assert value(seen["fallback"], "kafka_throttle_fallback_in_force") == 1.0
    assert value(after, last_success) == START + 135
    assert value(after, valid_until) == START + 135 + 120
    assert value(after, "kafka_throttle_fallback_in_force") == 0.0


def test_ratio_limits_are_exported_as_ratios():
    samples = parse(scrape_after(busy_service, RATIO_LIMITS))
    assert value(samples, "kafka_throttle_limit_min_available_ratio", limit="hard") == 0.1
    assert value(samples, "kafka_throttle_limit_min_available_ratio", limit="soft") == 0.3
    assert not any(name == "kafka_throttle_limit_min_available_bytes" for name, _ in samples)


def test_observation_switched_off_exports_the_settings_but_no_latest_successful_round():
    samples = parse(scrape_after(busy_service, storage_check_interval="PT0S"))
    assert value(samples, "kafka_throttle_factor_validity_seconds") == 120.0
    assert value(samples, "kafka_throttle_limit_min_available_bytes", limit="hard") == 100.0
    assert not any(name == "kafka_throttle_last_successful_round_timestamp_seconds" for name, _ in samples)
    assert value(samples, "kafka_throttle_factor") == 1.0


def test_long_polls_are_kept_out_of_the_request_latency_histogram():
    async def polls(client, loop, clock):
        loop.apply_round(every_kind_of_volume(clock()))
        etag = (await client.get("/throttle-factor")).headers["etag"]
        held = await client.get("/throttle-factor", params={"wait": "0.3"}, headers={"If-None-Match": etag})
        assert held.status_code == 304

    samples = parse(scrape_after(polls))
    answered = {"handler": "/throttle-factor", "method": "GET", "status": "2xx"}
    assert value(samples, "http_request_duration_seconds_count", **answered) == 1.0
    assert value(samples, "http_request_duration_seconds_count", **{**answered, "status": "3xx"}) is None
    assert value(samples, "http_request_duration_seconds_sum", **answered) < 0.25
    long_poll = {**answered, "status": "3xx"}
    assert value(samples, "http_long_poll_duration_seconds_count", **long_poll) == 1.0
    assert value(samples, "http_long_poll_duration_seconds_sum", **long_poll) >= 0.29
    assert value(samples, "http_requests_total", **long_poll) == 1.0, "long-polls are still counted as requests"


def test_the_build_info_names_the_revision_from_the_image_or_the_checkout(monkeypatch):
    def revisions() -> list[str]:
        return [dict(labels)["revision"] for name, labels in parse(scrape_after(busy_service)) if name == "kafka_throttle_build_info"]

    monkeypatch.setenv(REVISION_VARIABLE, "0123456789ab")
    assert revisions() == ["0123456789ab"]
    monkeypatch.delenv(REVISION_VARIABLE)
    checkout = run_command(["git", "rev-parse", "--short=12", "HEAD"], 60, cwd=ROOT)
    assert revisions() == [checkout.stdout.strip() if checkout.returncode == 0 else "unknown"]


def test_the_quota_store_metrics_count_what_it_holds_and_the_writes_it_did_not_take():
    token = {"Authorization": "Bearer metrics-test-token-0123"}

    async def changes(client, loop, clock):
        assert (await client.put("/quotas/overrides", params={"user": "alice"}, json={"produce": 1048576}, headers=token)).status_code == 200
        group = {"users": ["bob"], "limits": {"produce": 2097152}}
        assert (await client.put("/quotas/groups/etl", json=group, headers=token)).status_code == 200
        quotas = client._transport.app.state.service.quotas

        def broken_disk(*args):
            raise sqlite3.OperationalError("disk I/O error")

        quotas.store.put_override = broken_disk
        failed = await client.put("/quotas/overrides", params={"user": "carol"}, json={"produce": 1048576}, headers=token)
        assert failed.status_code >= 500

    samples = parse(scrape_after(changes, admin_token="metrics-test-token-0123"))
    assert value(samples, "kafka_throttle_quota_overrides") == 1
    assert value(samples, "kafka_throttle_quota_groups") == 1
    assert value(samples, "kafka_throttle_quota_store_write_failures_total") == 1
    assert value(samples, "kafka_throttle_quota_store_lag_records") == 0  # SQLite: nothing to trail


def test_a_scrape_reads_the_decider_on_the_event_loop_that_owns_it_not_on_its_own_thread():
    import threading

    threads: dict[str, int] = {}

    async def spied(client, loop, clock):
        decide = loop.decider.decision
        cached = loop.decider.cache.volumes

        def decision(now: float):
            threads["decision"] = threading.get_ident()
            return decide(now)

        def volumes():
            threads["volumes"] = threading.get_ident()
            return cached()

        loop.decider.decision = decision
        loop.decider.cache.volumes = volumes
        threads["event loop"] = threading.get_ident()
        loop.apply_round(every_kind_of_volume(clock()))

    samples = parse(scrape_after(spied))
    assert threads["decision"] == threads["volumes"] == threads["event loop"]
    assert value(samples, "kafka_throttle_volume_available_bytes", broker_id="1", log_dir="/data/a") == 200


def test_the_history_writers_last_write_is_exported_only_while_the_history_is_on():
    import time

    started = time.time()
    on = parse(scrape_after(busy_service))
    assert started <= value(on, "kafka_throttle_history_last_written_timestamp_seconds") <= time.time()
    off = parse(scrape_after(busy_service, history_enabled="false"))
    assert value(off, "kafka_throttle_history_last_written_timestamp_seconds") is None


def test_a_single_process_says_it_decides_and_counts_the_snapshots_it_could_not_keep():
    samples = parse(scrape_after(busy_service))
    assert value(samples, "kafka_throttle_deciding") == 1.0
    assert value(samples, "kafka_throttle_state_save_failures_total") == 0.0

    async def rounds_that_cannot_be_kept(client, loop, clock):
        path = loop.saved_state.path
        path.unlink(missing_ok=True)
        path.mkdir()  # no file can replace a folder: every save fails
        loop.apply_round(every_kind_of_volume(clock()))
        loop.saved_state._writer.close()  # noqa: SLF001 - until the writer has tried

    samples = parse(scrape_after(rounds_that_cannot_be_kept))
    assert value(samples, "kafka_throttle_state_save_failures_total") >= 1.0
