"""The fault matrix of docs/reliability.md: each row breaks a real 3-broker cluster (with the shim in
every broker) while the real service observes it, and checks the decision the service serves
and what the shims do with it against the expected decision written down in docs/reliability.md.

One cluster serves every row; each row leaves it whole (every broker running, no filler,
its topics deleted) so the order of the rows does not matter. Broker 1 has two log dirs
(JBOD) so that a full one goes offline while the broker keeps running; brokers 2 and 3 have
one, and Kafka halts a broker whose only log dir fails."""

from __future__ import annotations

import csv
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from devtools.commands import run_command
from devtools.devcluster import LocalKafkaCluster, ensure_kafka_jars

from .conftest import VOLUME_MIB, MiB, create_topic_on, delete_topic, fill, free_port
from .shim_harness import (
    CHECK,
    LOAD_RATE,
    POLL,
    SERVICE_SETTINGS,
    SHIM_TABLE_LINE,
    LoadProducer,
    broker_log_count,
    operator_config,
    running_shim_cluster,
    shim_lines,
    wait_for_shims,
    wait_until,
)
from .test_history_on_kafka import history_lines

STORAGE_ERROR = "log dir error KAFKA_STORAGE_ERROR"
# Both of the shim's fallback lines: "...; fallback factor F (STATE) applies until <url> answers" / "... until it answers".
SHIM_FELL_BACK = ("applies until",)
# The state a shim switched to: "table from <url>: factor F (STATE, source S)" or "factor F (STATE, source S), was ...".
SHIM_STATE = re.compile(r"Throttle service shim: (?:table from \S+: )?factor [\d.]+ \((\w+), source")


@pytest.fixture(scope="module")
def service_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def shim_cluster(shim_jar: Path, service_port: int) -> Iterator[LocalKafkaCluster]:
    with running_shim_cluster(shim_jar, service_port, extra_log_dirs={1: 1}) as cluster:
        yield cluster


@pytest.fixture
def whole_cluster(shim_cluster: LocalKafkaCluster) -> Iterator[LocalKafkaCluster]:
    """The shared cluster, made whole again after the row whatever happened in it."""
    yield shim_cluster
    for broker_id in shim_cluster.broker_ids:
        shim_cluster.thaw_broker(broker_id)
        for index in range(len(shim_cluster.log_dirs(broker_id))):
            (shim_cluster.mount_point(broker_id, index) / "filler").unlink(missing_ok=True)
        if not shim_cluster.is_running(broker_id):
            shim_cluster.start_broker(broker_id)
    admin = AdminClient({"bootstrap.servers": shim_cluster.bootstrap_servers})
    leftovers = [t for t in admin.list_topics(timeout=30).topics if t.startswith("fault-")]
    if leftovers:
        for future in admin.delete_topics(leftovers).values():
            future.result(timeout=30)


@pytest.fixture
def observed_service(whole_cluster, start_service, service_port):
    """Start the service on the port the shims poll; returns it once it observes OPEN and
    every shim holds a table from it."""

    def start(**settings: str):
        before = broker_log_count(whole_cluster, SHIM_TABLE_LINE)
        service = start_service(
            http_port=str(service_port), kafka_admin_bootstrap_servers=whole_cluster.bootstrap_servers, **{**SERVICE_SETTINGS, **settings}
        )
        service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN" and d["round"]["complete"], 30, "observed OPEN")
        wait_for_shims(whole_cluster, before, timeout=20)
        return service

    return start


class DecisionRecorder:
    """Polls /throttle-factor every ``interval`` seconds on its own thread and keeps every decision seen."""

    def __init__(self, base_url: str, interval: float = 0.1) -> None:
        self.interval = interval
        self.samples: list[tuple[float, dict]] = []
        self.errors: list[str] = []
        self._client = httpx.Client(base_url=base_url, timeout=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                response = self._client.get("/throttle-factor")
                if response.status_code == 200:
                    self.samples.append((time.monotonic(), response.json()))
                else:  # e.g. a balancer's 502 while the replica behind it restarts
                    self.errors.append(f"{response.status_code} {response.text[:200]}")
            except httpx.HTTPError as exc:
                self.errors.append(repr(exc))
            time.sleep(self.interval)

    def seen(self, key: str, since: float = 0.0) -> set:
        return {decision[key] for at, decision in list(self.samples) if at >= since}

    def sequence(self, *keys: str) -> list[tuple]:
        """The distinct values of ``keys`` in the order they were seen, repeats collapsed."""
        out: list[tuple] = []
        for _, decision in list(self.samples):
            value = tuple(decision[k] for k in keys)
            if not out or out[-1] != value:
                out.append(value)
        return out

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._client.close()


class NodeReporter:
    """Reports node ``node_id``'s metadata volume every ``interval`` seconds on its own thread, as
    its shim would at its poll interval; the answers are kept (a balancer's 502 while a replica
    restarts is one)."""

    def __init__(self, base_url: str, node_id: int, free_ratio: float, interval: float) -> None:
        from .test_replicas import NODE_TOKEN, metadata_report

        self.answers: list[str] = []
        self._path = f"/nodes/{node_id}/volumes"
        self._body = metadata_report(free_ratio)
        self._client = httpx.Client(base_url=base_url, timeout=5, headers={"Authorization": f"Bearer {NODE_TOKEN}"})
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def accepted(self) -> int:
        return self.answers.count("204")

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.answers.append(str(self._client.put(self._path, json=self._body).status_code))
            except httpx.HTTPError as exc:
                self.answers.append(repr(exc))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._client.close()


@pytest.fixture
def recorder():
    recorders: list[DecisionRecorder] = []

    def start(service, interval: float = 0.1) -> DecisionRecorder:
        recorders.append(DecisionRecorder(service.base_url, interval))
        return recorders[-1]

    yield start
    for r in recorders:
        r.stop()


def shim_states(cluster: LocalKafkaCluster) -> dict[int, list[str]]:
    """Every state each broker's shim switched to, in order, over the broker's whole log."""
    return {
        bid: [m.group(1) for m in SHIM_STATE.finditer(cluster.server_log(bid).read_text(errors="replace"))] for bid in cluster.broker_ids
    }


def wait_for_shim_state(cluster: LocalKafkaCluster, before: dict[int, list[str]], state: str, timeout: float, brokers=None) -> None:
    """Until the shim of every broker in ``brokers`` (default: all) switched to ``state`` since ``before``."""
    brokers = brokers or cluster.broker_ids

    def switched() -> bool:
        now = shim_states(cluster)
        return all(state in now[b][len(before.get(b, [])) :] for b in brokers)

    wait_until(switched, timeout, f"every shim switched to {state}", lambda: shim_lines(cluster)[-4000:])


def fell_back(cluster: LocalKafkaCluster) -> dict[int, int]:
    counts = [broker_log_count(cluster, text) for text in SHIM_FELL_BACK]
    return {bid: sum(c[bid] for c in counts) for bid in cluster.broker_ids}


def volume_keys(entries: list[dict]) -> set[tuple[int, str]]:
    return {(e["broker_id"], e["log_dir"]) for e in entries}


def fill_with_file(mount_point: Path, leave: int) -> None:
    """A filler file on the volume's tmpfs that leaves ``leave`` usable bytes."""
    stats = os.statvfs(mount_point)
    usable = stats.f_bavail * stats.f_frsize
    with open(mount_point / "filler", "wb") as fh:
        fh.write(b"\0" * max(0, usable - leave))


# -- the rows ----------------------------------------------------------------------------


def test_a_broker_killed_and_restarted_is_observed_again_and_a_fill_on_it_pauses(whole_cluster, observed_service, recorder):
    cluster = whole_cluster
    service = observed_service()
    decisions = recorder(service)
    log_dirs = service.decision()["active_log_dirs"]
    cluster.kill_broker(2)
    killed = time.monotonic()
    # Named as missing while DescribeCluster still lists it, then fenced (3 s session timeout).
    service.wait_for(lambda d: d["active_brokers"] == 2, 20, "broker 2 fenced and no longer active")
    time.sleep(2 * CHECK)
    assert service.decision()["active_log_dirs"] == log_dirs, "the killed broker's log dir stays in the view within the validity"
    cluster.start_broker(2)
    service.wait_for(lambda d: d["active_brokers"] == 3 and d["round"]["complete"], 30, "broker 2 answering again")
    assert decisions.seen("source", killed) == {"observed"} and decisions.seen("state", killed) == {"OPEN"}, decisions.sequence("state", "source")
    assert any(m["broker_id"] == 2 for _, d in decisions.samples for m in d["round"]["missing_brokers"]), "broker 2 never named missing"

    # strimzi/kafka-quotas-plugin#40: the restarted broker is not forgotten: a fill on it counts.
    create_topic_on(cluster, "fault-kill", 2)
    before = shim_states(cluster)
    fill(cluster, "fault-kill", VOLUME_MIB - 24 + 4, operator_config(cluster))
    decision, _ = service.wait_for(lambda d: d["state"] == "PAUSE", 10, "PAUSE from the restarted broker's volume")
    assert {e["broker_id"] for e in decision["breaching"]} == {2}
    wait_for_shim_state(cluster, before, "PAUSE", 10)
    delete_topic(cluster, "fault-kill")
    service.wait_for(lambda d: d["state"] == "OPEN", 30, "OPEN once the volume is freed")
    wait_for_shim_state(cluster, before, "OPEN", 10)


def test_a_broker_frozen_past_the_request_timeout_keeps_its_last_observation_and_nothing_flaps(whole_cluster, observed_service, recorder):
    cluster = whole_cluster
    service = observed_service()
    decisions = recorder(service)
    fallbacks = fell_back(cluster)
    started = time.monotonic()
    cluster.freeze_broker(3)
    try:
        # The request timeout is 0.8 s: after two rounds the frozen broker is named missing.
        decision, _ = service.wait_for(lambda d: [m["broker_id"] for m in d["round"]["missing_brokers"]] == [3], 10, "broker 3 missing")
        assert decision["source"] == "observed" and decision["state"] == "OPEN"
        time.sleep(5.0)  # past the request timeout many times over, and past the 3 s session timeout
    finally:
        cluster.thaw_broker(3)
    frozen_for = time.monotonic() - started
    service.wait_for(lambda d: d["active_brokers"] == 3 and d["round"]["complete"], 30, "broker 3 answering again")
    time.sleep(2 * CHECK)
    assert decisions.errors == []
    assert decisions.sequence("state", "source", "factor") == [("OPEN", "observed", 1.0)], decisions.sequence("state", "source", "factor")
    assert fell_back(cluster) == fallbacks, "a shim fell back:\n" + shim_lines(cluster)[-3000:]
    print(f"\nfrozen for {frozen_for:.1f} s; {len(decisions.samples)} decisions sampled, all observed OPEN")


def test_all_brokers_down_keep_the_last_valid_factor_then_the_fallback_then_recover(whole_cluster, observed_service, recorder):
    cluster = whole_cluster
    validity = 8.0
    service = observed_service(throttle_factor_validity_duration="PT8S", throttle_factor_fallback="0.0")
    decisions = recorder(service)
    for broker_id in cluster.broker_ids:
        cluster.kill_broker(broker_id)
    down = time.monotonic()
    decision, _ = service.wait_for(lambda d: d["source"] == "last-valid", 10, "last-valid once the rounds fail")
    assert decision["state"] == "OPEN" and decision["round"]["error"], decision
    service.wait_for(lambda d: d["source"] == "fallback", validity + 5, "the fallback once the last valid factor expired")
    fallback_at = time.monotonic()
    assert fallback_at - down >= validity - 2 * CHECK - 1, "the last valid factor was dropped before it expired"
    assert service.decision()["state"] == "PAUSE" and service.decision()["factor"] == 0.0
    before = shim_states(cluster)
    for broker_id in cluster.broker_ids:
        cluster.start_broker(broker_id)
    service.wait_for(lambda d: d["source"] == "observed" and d["round"]["complete"] and d["active_brokers"] == 3, 30, "observed again")
    wait_for_shim_state(cluster, before, "OPEN", 20)
    seen = decisions.sequence("state", "source")
    context = (seen, service.log()[-4000:])
    # Down: the last valid factor, then the fallback once it expired, and nothing else.
    fallback = seen.index(("PAUSE", "fallback"))
    assert [s for s in seen[:fallback] if s != ("OPEN", "observed")] == [("OPEN", "last-valid")], context
    # Back: observed at once, and never PAUSE or the fallback again. A round that fails while
    # the restarted brokers settle (a DescribeCluster past the 0.8 s request timeout on a busy
    # machine) keeps the last valid factor, the OPEN just observed: the state does not move.
    back = seen[fallback + 1 :]
    assert back[0] == ("OPEN", "observed"), context
    assert all(s in (("OPEN", "observed"), ("OPEN", "last-valid")) for s in back), context
    print(f"\nall brokers down: last-valid for {fallback_at - down:.1f} s (validity {validity:.0f} s), then fallback PAUSE; "
          f"{back.count(('OPEN', 'last-valid'))} failed round(s) while the brokers settled")


def test_an_offline_log_dir_pauses_until_the_broker_brings_it_back(whole_cluster, observed_service, recorder):
    cluster = whole_cluster
    service = observed_service()
    decisions = recorder(service)
    create_topic_on(cluster, "fault-offline", 1)

    def holding() -> list[int]:
        return [i for i, d in enumerate(cluster.log_dirs(1)) if (d / "fault-offline-0").exists()]

    wait_until(holding, 15, "the partition created in one of broker 1's log dirs")
    index = holding()[0]
    assert not (cluster.log_dir(1, index) / "load-0").exists(), "Kafka put the new partition next to load-0: the load would stop"
    offline_dir = str(cluster.log_dir(1, index))
    load = LoadProducer({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        time.sleep(2)
        assert load.throttles == [], "a healthy cluster throttles nobody"
        before = shim_states(cluster)
        fill_with_file(cluster.mount_point(1, index), leave=MiB)
        filled = time.monotonic()
        # The next write fails: Kafka takes the dir offline and keeps the broker up on its other dir.
        producer_errors = _produce_expecting_failure(cluster, "fault-offline")
        decision, _ = service.wait_for(
            lambda d: any(e["reason"] == STORAGE_ERROR for e in d["breaching"]), 15, "the offline log dir reported as breaching"
        )
        assert cluster.is_running(1), "with another live log dir the broker keeps running"
        assert decision["state"] == "PAUSE" and decision["factor"] == 0.0
        assert (1, offline_dir) in volume_keys(decision["breaching"])
        wait_for_shim_state(cluster, before, "PAUSE", 10)
        wait_until(lambda: len(load.throttled_brokers(filled)) == 3, 15, "producers throttled on every broker")

        # Freeing the disk does not bring the dir back; the decision must not pretend it does.
        (cluster.mount_point(1, index) / "filler").unlink()
        freed = time.monotonic()
        time.sleep(4 * CHECK)
        assert decisions.seen("state", freed) == {"PAUSE"}
        assert any(e["reason"] == STORAGE_ERROR for e in service.decision()["breaching"])
        assert decisions.seen("state", filled + 3 * CHECK) == {"PAUSE"}, "a healthy factor while the dir was offline"

        before = shim_states(cluster)
        cluster.stop_broker(1)
        cluster.start_broker(1)
        decision, _ = service.wait_for(lambda d: d["state"] == "OPEN" and d["round"]["complete"] and d["active_brokers"] == 3, 30, "OPEN")
        assert decision["breaching"] == []
        wait_for_shim_state(cluster, before, "OPEN", 15)
        # Many rounds with the dir offline, one line when it went and one when it came back.
        log = service.log()
        assert log.count(f"log dir {offline_dir} offline: KAFKA_STORAGE_ERROR") == 1, log
        assert log.count(f"log dir {offline_dir} back online") == 1, log
        assert_no_line_repeated(log)
        print(f"\noffline log dir: producer errors while it failed: {producer_errors[:1]}; decisions {decisions.sequence('state', 'source')}")
    finally:
        load.stop()


def assert_no_line_repeated(log: str) -> None:
    """No message of the service's own loggers appears twice (timestamps aside)."""
    messages = [line.split(" ", 2)[2] for line in log.splitlines() if " app." in line and line[:4].isdigit()]
    repeated = {m for m in messages if messages.count(m) > 1}
    assert not repeated, f"logged more than once: {sorted(repeated)}\n{log}"


def _produce_expecting_failure(cluster: LocalKafkaCluster, topic: str) -> list[str]:
    """Write to a full volume until the broker fails the write; returns the delivery errors."""
    errors: list[str] = []
    producer = Producer({**operator_config(cluster), "acks": "1", "message.timeout.ms": 8000, "compression.type": "none"})
    for _ in range(16):
        producer.produce(topic, b"\1" * (256 * 1024), on_delivery=lambda err, msg: errors.append(str(err)) if err else None)
        producer.poll(0)
    producer.flush(15)
    return errors


def halt_broker_with_a_full_disk(cluster: LocalKafkaCluster, service, broker_id: int, topic: str) -> float:
    """Fill the broker's only log dir until Kafka halts the broker; returns when it was fenced."""
    create_topic_on(cluster, topic, broker_id)
    before = shim_states(cluster)
    fill_with_file(cluster.mount_point(broker_id), leave=MiB)
    decision, _ = service.wait_for(lambda d: d["state"] == "PAUSE", 10, f"PAUSE from broker {broker_id}'s volume past the hard limit")
    assert {e["broker_id"] for e in decision["breaching"]} == {broker_id}
    wait_for_shim_state(cluster, before, "PAUSE", 10)
    _produce_expecting_failure(cluster, topic)
    wait_until(
        lambda: not cluster.is_running(broker_id),
        30,
        f"Kafka halting broker {broker_id} (its only log dir failed)",
        lambda: cluster.server_log(broker_id).read_text()[-3000:],
    )
    service.wait_for(lambda d: [f["broker_id"] for f in d["fenced_brokers"]] == [broker_id], 20, f"broker {broker_id} fenced")
    return time.monotonic()


def test_a_broker_halted_by_a_full_disk_keeps_the_cluster_paused_until_it_is_back(whole_cluster, observed_service, recorder, tmp_path):
    cluster = whole_cluster
    validity = 4.0
    history = tmp_path / "history"
    service = observed_service(throttle_factor_validity_duration="PT4S", history_dir=str(history))
    decisions = recorder(service)
    fenced = halt_broker_with_a_full_disk(cluster, service, 2, "fault-halt")
    time.sleep(3 * validity)  # far past the validity duration: the fenced broker's observation is kept
    assert decisions.seen("state", fenced) == {"PAUSE"}, decisions.sequence("state", "source")
    decision = service.decision()
    assert decision["source"] == "observed" and decision["active_brokers"] == 2, decision
    assert [(e["broker_id"], e["broker_fenced"]) for e in decision["breaching"]] == [(2, True)], decision
    kept = [v for v in service.client.get("/volumes").json()["volumes"] if v["broker_id"] == 2]
    assert kept and all(v["broker_fenced"] and v["age_seconds"] > 3 * validity for v in kept), kept
    assert "kafka_throttle_fenced_brokers 1.0" in service.client.get("/metrics").text
    halt_line = [line for line in cluster.server_log(2).read_text(errors="replace").splitlines() if "all log dirs" in line.lower()]

    (cluster.mount_point(2) / "filler").unlink()
    before = shim_states(cluster)
    cluster.start_broker(2)
    service.wait_for(lambda d: d["state"] == "OPEN" and d["round"]["complete"] and d["active_brokers"] == 3, 30, "OPEN with broker 2 back")
    wait_for_shim_state(cluster, before, "OPEN", 15)
    log = service.log()
    assert log.count("broker 2 fenced") == 1 and log.count("broker 2 unfenced") == 1, log
    assert "broker 2 answering again" not in log, log
    print(f"\nhalted broker: {halt_line[-1:] or 'no halt line'}; decisions {decisions.sequence('state', 'source')}")
    service.stop()  # the writer finishes its queue on shutdown
    assert_the_report_explains_the_pause(history, tmp_path / "report", broker_id=2, validity=validity)


def assert_the_report_explains_the_pause(history: Path, output: Path, broker_id: int, validity: float) -> None:
    """The history kept the halted broker's observation in every round that rested on it; the
    report's episode of it lasts until the round that opened again, and no round is in PAUSE
    without an open episode."""
    rows = history_lines(history)
    kept = [r for r in rows if r["broker_id"] == broker_id and r["kept"] == "fenced"]
    assert kept and max(r["observation_age_seconds"] for r in kept) > 3 * validity, "the fenced broker's observation, kept past the validity"
    assert all(r["volume_status"] == "breaching" and r["observed_at"] < r["time"] for r in kept)
    paused = [r["time"] for r in rows if r["state"] == "PAUSE" and r["source"] in ("observed", "last-valid")]
    reopened = min(r["time"] for r in rows if r["state"] == "OPEN" and r["time"] > max(paused))
    # Rounds of a loaded machine may be late, so gaps count from 30 s here.
    command = [str(Path(sys.executable).parent / "throttle-report"), "--input", str(history), "--output", str(output), "--master", "local[2]", "--max-gap", "30"]
    finished = run_command(command, 600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "rounds in THROTTLE or PAUSE that no open episode explains: 0" in finished.stdout, finished.stdout
    with (output / "episodes.csv").open() as handle:
        hard = [e for e in csv.DictReader(handle) if e["limit"] == "hard" and e["broker_id"] == str(broker_id)]
    (episode,) = hard
    assert (episode["end_reason"], episode["end"]) == ("back-with-room", reopened), (episode, reopened)
    assert episode["start"] <= min(paused)
    with (output / "brokers.csv").open() as handle:
        brokers = {b["broker_id"]: b for b in csv.DictReader(handle)}
    assert float(brokers[str(broker_id)]["fenced_seconds"]) > 3 * validity
    print(f"report: episode {episode['start']} - {episode['end']} ({episode['end_reason']}), OPEN again at {reopened}")




def test_a_halted_broker_unregistered_with_the_admin_api_is_forgotten_after_the_validity(whole_cluster, observed_service, recorder):
    cluster = whole_cluster
    validity = 4.0
    service = observed_service(throttle_factor_validity_duration="PT4S")
    decisions = recorder(service)
    fenced = halt_broker_with_a_full_disk(cluster, service, 3, "fault-unregister")
    time.sleep(2 * validity)
    assert decisions.seen("state", fenced) == {"PAUSE"}, decisions.sequence("state", "source")
    unregister_broker(cluster, 3)
    unregistered = time.monotonic()
    decision, waited = service.wait_for(lambda d: d["state"] == "OPEN", validity + 5, "OPEN once broker 3 is forgotten")
    assert waited >= validity - 1.5, f"forgotten {waited:.1f} s after it was unregistered, before the validity duration"
    assert decision["source"] == "observed" and decision["fenced_brokers"] == [] and decision["active_brokers"] == 2
    assert decisions.seen("source", unregistered) == {"observed"}
    # The view dropped it at the instant it expired; the next round evicts it and says so.
    wait_until(lambda: "forgot broker 3 log dir" in service.log(), 2 * CHECK + 1, "the line saying broker 3 was forgotten", service.log)
    log = service.log()
    assert log.count("broker 3 no longer registered") == 1 and log.count("forgot broker 3 log dir") == 1, log
    print(f"\nunregistered halted broker: OPEN {waited:.1f} s after unregistering (validity {validity:.0f} s)")


def unregister_broker(cluster: LocalKafkaCluster, broker_id: int) -> None:
    """The Java Admin API's unregisterBroker, as kafka-cluster.sh does it."""
    source = Path(__file__).parent / "java" / "UnregisterBroker.java"
    classpath = f"{ensure_kafka_jars()}/*"
    result = run_command(["java", "-cp", classpath, source, cluster.bootstrap_servers, str(broker_id)], 120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]


def test_a_gracefully_stopped_broker_never_flaps_the_decision_when_its_observation_expires(
    whole_cluster, observed_service, start_service, recorder
):
    cluster = whole_cluster
    validity = 4.0
    settings = {"throttle_factor_validity_duration": "PT4S", "throttle_factor_fallback": "0.0"}
    expiring = observed_service(**settings, fenced_broker_observations="expire")
    keeping = start_service(kafka_admin_bootstrap_servers=cluster.bootstrap_servers, **{**SERVICE_SETTINGS, **settings})
    keeping.wait_for(lambda d: d["source"] == "observed" and d["round"]["complete"], 30, "observed")
    log_dirs = keeping.decision()["active_log_dirs"]
    samples = {"expire": recorder(expiring, interval=0.05), "keep": recorder(keeping, interval=0.05)}
    # The shims poll the expiring service with long-polls longer than the validity.
    fallbacks = fell_back(cluster)
    cluster.stop_broker(2)
    stopped = time.monotonic()
    expiring.wait_for(lambda d: d["active_log_dirs"] == log_dirs and d["active_brokers"] == 2, 10, "broker 2 fenced")
    time.sleep(validity + 4.0)
    for policy, decisions in samples.items():
        assert decisions.errors == []
        assert decisions.sequence("state", "source") == [("OPEN", "observed")], (policy, decisions.sequence("state", "source", "valid_until"))
        # Sampled densely enough to see a flap (a loaded machine answers fewer than one a 0.05 s).
        assert len([1 for at, _ in decisions.samples if at >= stopped]) > 50, policy
    assert expiring.decision()["active_log_dirs"] == log_dirs - 1, "with expire, broker 2's log dir is forgotten after the validity"
    running = [b for b in cluster.broker_ids if b != 2]
    assert {b: fell_back(cluster)[b] for b in running} == {b: fallbacks[b] for b in running}, "a shim fell back:\n" + shim_lines(cluster)[-3000:]
    assert [f["broker_id"] for f in keeping.decision()["fenced_brokers"]] == [2], "with keep, it stays while registered"
    cluster.start_broker(2)
    for service in (expiring, keeping):
        service.wait_for(lambda d: d["round"]["complete"] and d["active_brokers"] == 3 and d["active_log_dirs"] == log_dirs, 30, "broker 2 back")
    print(f"\ngraceful stop: {[len(d.samples) for d in samples.values()]} decisions sampled every 50 ms, all observed OPEN")


def test_killing_the_service_keeps_the_last_table_until_it_expires_then_the_fallback_pauses(whole_cluster, observed_service):
    cluster = whole_cluster
    validity = 5.0
    service = observed_service(throttle_factor_validity_duration="PT5S")
    kept_before = broker_log_count(cluster, "keeping the last table")
    expired_before = broker_log_count(cluster, "the last quota table expired")
    load = LoadProducer({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        time.sleep(2)
        assert load.throttles == [], shim_lines(cluster)
        # The decision's validity at the kill (a round after this read only moves it later). A
        # shim's copy was renewed by its latest poll, up to a round and a poll interval before it.
        valid_until = datetime.fromisoformat(service.decision()["valid_until"]).timestamp()
        service.process.send_signal(signal.SIGKILL)
        service.process.wait(5)
        killed = time.monotonic()
        # Until the shims' copies lapse (at most `validity` after the kill; earlier when the last
        # rounds were late on a loaded machine), nothing changes.
        time.sleep(max(0.0, valid_until - time.time() - CHECK - POLL - 0.5))
        assert load.throttled_brokers(killed) == {}, "the last table must be kept while it is valid"
        wait_until(lambda: len(load.throttled_brokers(killed)) == 3, validity + POLL + 5, "fallback 0.0 pausing every broker")
        kept = broker_log_count(cluster, "keeping the last table")
        expired = broker_log_count(cluster, "the last quota table expired")
        assert all(kept[b] - kept_before[b] == 1 for b in kept), f"one log line per change of state, got {kept}"
        assert all(expired[b] - expired_before[b] == 1 for b in expired), f"one log line per change of state, got {expired}"

        observed_service(throttle_factor_validity_duration="PT5S")
        back = time.monotonic()
        largest = max(t for _, _, t in load.throttles)
        wait_until(lambda: load.rate(time.monotonic() - 1, time.monotonic()) > 1.5 * LOAD_RATE, largest + 10, "throughput back")
        time.sleep(1)
        assert [t for t in load.throttles if t[0] > back + largest + 1] == []
    finally:
        load.stop()


def test_a_rolling_restart_under_the_default_settings_neither_falls_back_nor_flaps(whole_cluster, start_service, service_port, recorder):
    cluster = whole_cluster
    # The service's defaults (validity PT5M, fallback 1.0, request timeout 80% of the interval)
    # with a check interval short enough for rounds to run during every restart.
    before = broker_log_count(cluster, SHIM_TABLE_LINE)
    service = start_service(
        http_port=str(service_port),
        kafka_admin_bootstrap_servers=cluster.bootstrap_servers,
        storage_check_interval="PT1S",
        storage_per_volume_limit_min_available_bytes=SERVICE_SETTINGS["storage_per_volume_limit_min_available_bytes"],
    )
    service.wait_for(lambda d: d["source"] == "observed" and d["round"]["complete"], 30, "observed")
    wait_for_shims(cluster, before, timeout=20)
    decisions = recorder(service)
    fallbacks = fell_back(cluster)
    durations = {}
    for broker_id in cluster.broker_ids:
        started = time.monotonic()
        before = shim_states(cluster)
        cluster.stop_broker(broker_id)
        cluster.start_broker(broker_id)
        service.wait_for(lambda d: d["active_brokers"] == 3 and d["round"]["complete"], 30, f"broker {broker_id} answering again")
        wait_for_shim_state(cluster, before, "OPEN", 15, brokers=[broker_id])
        durations[broker_id] = round(time.monotonic() - started, 1)
    time.sleep(2 * CHECK)
    assert decisions.errors == []
    assert decisions.sequence("state", "source", "factor") == [("OPEN", "observed", 1.0)], decisions.sequence("state", "source", "factor")
    assert fell_back(cluster) == fallbacks, "a shim fell back:\n" + shim_lines(cluster)[-3000:]
    missing = {m["broker_id"] for _, d in decisions.samples for m in d["round"]["missing_brokers"]}
    print(f"\nrolling restart: seconds per broker {durations}; brokers named missing on the way {sorted(missing)};"
          f" {len(decisions.samples)} decisions sampled, all observed OPEN")


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_service_restarted_during_a_halted_broker_pause_resumes_the_pause(whole_cluster, start_service, service_port, stop):
    """The state issue's incident: broker 3 halted by a full disk holds the cluster in PAUSE on
    its kept observation; the service is stopped (kill -9 or SIGTERM) and started again with the
    same data dir. Restarted, it serves the saved PAUSE (as last-valid, resumed_from set) from its
    first answer, decides PAUSE at its first round, and no sample of /throttle-factor nor any
    shim switches to OPEN until the broker is back with room."""
    cluster = whole_cluster
    settings = {
        **SERVICE_SETTINGS,
        "http_port": str(service_port),
        "kafka_admin_bootstrap_servers": cluster.bootstrap_servers,
        "throttle_factor_validity_duration": "PT15S",
    }
    before = broker_log_count(cluster, SHIM_TABLE_LINE)
    service = start_service(**settings)
    service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN" and d["round"]["complete"], 30, "observed OPEN")
    wait_for_shims(cluster, before, timeout=20)
    halt_broker_with_a_full_disk(cluster, service, 3, "fault-restart")
    shims_before = shim_states(cluster)

    service.process.send_signal(stop)
    service.process.wait(10)
    restarted = start_service(**settings)
    samples = [restarted.decision()]
    first = samples[0]
    # Its first round starts at once: the first answer is the saved PAUSE or that round's.
    assert first["state"] == "PAUSE", first
    assert first["source"] == ("last-valid" if first["resumed_from"] is not None else "observed"), first
    deadline = time.monotonic() + 20
    while samples[-1]["resumed_from"] is not None:
        assert time.monotonic() < deadline, f"no round of its own within 20 s: {samples[-1]}\n{restarted.log()[-3000:]}"
        time.sleep(0.05)
        samples.append(restarted.decision())
    own = samples[-1]
    assert (own["state"], own["source"]) == ("PAUSE", "observed"), own
    assert [(e["broker_id"], e["broker_fenced"]) for e in own["breaching"]] == [(3, True)], own
    for _ in range(40):  # four more seconds of rounds: the kept observation holds the pause
        samples.append(restarted.decision())
        time.sleep(0.1)
    assert {d["state"] for d in samples} == {"PAUSE"}, [(d["state"], d["source"]) for d in samples]
    switched = shim_states(cluster)
    assert all("OPEN" not in switched[b][len(shims_before[b]) :] for b in cluster.broker_ids), shim_lines(cluster)[-3000:]
    assert "resumed the decider state saved at" in restarted.log(), restarted.log()[-3000:]
    assert "has no observation of it to keep" not in restarted.log()

    (cluster.mount_point(3) / "filler").unlink()
    cluster.start_broker(3)
    restarted.wait_for(lambda d: d["state"] == "OPEN" and d["round"]["complete"] and d["active_brokers"] == 3, 30, "OPEN with broker 3 back")
    print(f"\nrestart by {stop.name}: {len(samples)} decisions sampled from the first answer, all PAUSE; OPEN once broker 3 was back")


def test_two_replicas_behind_a_round_robin_balancer_never_flip_a_shim_through_an_incident_and_restarts(whole_cluster, start_service, service_port):
    """The state issue's replica test: two replicas on the Kafka store behind a balancer that
    sends each request to the other one, every broker's shim polling through it. A halted full
    broker pauses the cluster, a metadata fill is reported to one replica, then each replica in
    turn is restarted (the decider killed with -9, the other stopped with SIGTERM): no sample
    through the balancer and no shim ever goes back to OPEN while the broker is down, and the
    replicas' ETags meet within a check interval after each step."""
    from .round_robin import RoundRobin
    from .test_replicas import NODE_TOKEN, deciders, report_metadata_volume, wait_until_agreed

    cluster = whole_cluster
    ports = [free_port(), free_port()]
    settings = {
        **SERVICE_SETTINGS,
        "kafka_admin_bootstrap_servers": cluster.bootstrap_servers,
        "throttle_factor_validity_duration": "PT15S",
        "quota_store": "kafka",
        "quota_store_topic": f"fault-quotas-{os.getpid()}-{int(time.time())}",
        "node_token": NODE_TOKEN,
        "metadata_limit_min_available_ratio": "0.1",
    }
    before = broker_log_count(cluster, SHIM_TABLE_LINE)
    balancer = RoundRobin(service_port, ports)
    replicas = {port: start_service(http_port=str(port), **settings) for port in ports}
    sampler = DecisionRecorder(f"http://127.0.0.1:{service_port}", interval=0.05)
    reporter = None
    try:
        for replica in replicas.values():
            replica.wait_ready()
        replica_a, replica_b = replicas.values()
        replica_a.wait_for(lambda d: d["state"] == "OPEN" and d["round"]["complete"], 30, "observed OPEN")
        wait_for_shims(cluster, before, timeout=20)
        wait_until_agreed(list(replicas.values()), CHECK)

        halted = halt_broker_with_a_full_disk(cluster, replica_a, 3, "fault-replicas")
        shims_before = shim_states(cluster)
        wait_until_agreed(list(replicas.values()), CHECK)
        assert report_metadata_volume(replica_b, 1, 0.05).status_code == 204
        for replica in replicas.values():
            replica.wait_for(lambda d: d["mutation_factor"] == 0.0, 1.0, "the metadata breach on both replicas")
        breached = time.monotonic()
        # Node 1 goes on reporting as its shim would, through the balancer: a report lives a
        # validity duration (15 s) from its arrival, and the restarts below can take longer.
        reporter = NodeReporter(f"http://127.0.0.1:{service_port}", 1, 0.05, interval=2.0)
        wait_until_agreed(list(replicas.values()), CHECK)

        for stop in (signal.SIGKILL, signal.SIGTERM):
            current = list(replicas.values())
            leading = deciders(current)
            assert len(leading) == 1, [s.log()[-1500:] for s in current]
            target = leading[0] if stop == signal.SIGKILL else next(s for s in current if s is not leading[0])
            port = int(target.base_url.rsplit(":", 1)[1])
            target.process.send_signal(stop)
            target.process.wait(10)
            replicas[port] = start_service(http_port=str(port), **settings)
            replicas[port].wait_ready()
            survivors = list(replicas.values())
            deadline = time.monotonic() + 30
            while len(deciders(survivors)) != 1:
                assert time.monotonic() < deadline, "no decider after the restart"
                time.sleep(0.1)
            wait_until_agreed(survivors, CHECK)

        states = sampler.seen("state", halted)
        assert states == {"PAUSE"}, sampler.sequence("state", "source")
        assert sampler.seen("mutation_factor", breached) == {0.0}, sampler.sequence("mutation_factor", "source")
        assert reporter.accepted > 0, reporter.answers
        reporter.stop()
        switched = shim_states(cluster)
        assert all("OPEN" not in switched[b][len(shims_before[b]) :] for b in cluster.broker_ids), shim_lines(cluster)[-3000:]

        (cluster.mount_point(3) / "filler").unlink()
        before_back = shim_states(cluster)
        cluster.start_broker(3)
        for replica in replicas.values():
            replica.wait_for(lambda d: d["state"] == "OPEN" and d["active_brokers"] == 3, 30, "OPEN with broker 3 back")
        wait_for_shim_state(cluster, before_back, "OPEN", 20, brokers=[1, 2])
        print(f"\nround-robin replicas: {len(sampler.samples)} decisions through the balancer ({balancer.forwarded} requests forwarded,"
              f" {balancer.failed} to a replica restarting), every one PAUSE while broker 3 was down")
    finally:
        if reporter is not None:
            reporter.stop()
        sampler.stop()
        balancer.close()
