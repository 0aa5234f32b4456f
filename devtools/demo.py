"""``throttle-demo``: watch the service protect a cluster.

It creates a topic whose only partition lives on one broker, produces to it at a steady
rate until that broker's volume crosses the limits (the decision goes THROTTLE, where the
producer's quota shrinks with the factor, then PAUSE, where it is held to the quota floor), then
frees the volume by setting a small ``retention.bytes`` on the topic and keeps producing until the
decision and the producer's throughput are back. Every second it prints the volume, the decision,
the producer's quota (as the service resolves it) and its throughput.

Freeing is as quick as the brokers' ``log.retention.check.interval.ms`` (1 s on the local
stacks; 5 min by default on other clusters). The topic is deleted at the end."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

import httpx

MiB = 1024 * 1024
MESSAGE_BYTES = 16 * 1024
CLIENT_ID = "throttle-demo"
TICK = 0.02


@dataclass
class Sample:
    at: float
    state: str
    factor: float
    source: str
    usable: int | None
    total: int | None
    rate: float
    throttle_ms: int
    quota: float | None  # the producer's effective produce quota per broker; None: unlimited


@dataclass
class Meter:
    """Acknowledged bytes and throttle times reported by the producer's callbacks."""

    acked: int = 0
    throttle_ms: list[int] = field(default_factory=list)

    def on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked += len(msg.value())

    def on_throttle(self, event) -> None:
        self.throttle_ms.append(round(event.throttle_time * 1000))  # confluent-kafka reports seconds


class DemoFailed(Exception):
    pass


def _mib(n: float | None) -> str:
    return "?" if n is None else f"{n / MiB:.1f} MiB"


def _rate(n: float | None) -> str:
    if n is None:
        return "unlimited"
    return f"{n / MiB:.2f} MiB/s" if n >= 0.1 * MiB else f"{n / 1024:.0f} KiB/s"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class Demo:
    def __init__(self, args: argparse.Namespace) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        self.args = args
        self.http = httpx.Client(base_url=args.service, timeout=5.0)
        self.admin = AdminClient({"bootstrap.servers": args.bootstrap_servers})
        self.meter = Meter()
        self.producer = Producer({
            "bootstrap.servers": args.bootstrap_servers,
            "client.id": CLIENT_ID,
            "acks": "1",
            "linger.ms": 5,
            # Requests of at most 64 KiB (librdkafka's default is 1 MB): at the 64 KiB/s floor a
            # 1 MB request alone costs 16 s of throttle (see "The quota floor" in docs/quotas.md).
            "batch.size": 65536,
            "queue.buffering.max.kbytes": 2048,
            "throttle_cb": self.meter.on_throttle,
        })
        self.rate = args.rate * MiB
        self.started = time.monotonic()
        self.payload = os.urandom(MESSAGE_BYTES)
        self.credit = 0.0
        self.last_tick = self.started
        self.samples: list[Sample] = []
        self.broker = args.broker

    # ------------------------------------------------------------------ service and Kafka

    def decision(self) -> dict:
        response = self.http.get("/throttle-factor")
        response.raise_for_status()
        return response.json()

    def quota(self) -> float | None:
        response = self.http.get("/quotas/resolve", params={"client-id": CLIENT_ID, "type": "produce"})
        response.raise_for_status()
        return response.json()["limit"]

    def volume(self) -> tuple[int | None, int | None]:
        response = self.http.get("/volumes")
        response.raise_for_status()
        mine = [v for v in response.json()["volumes"] if v["broker_id"] == self.broker]
        if not mine:
            return None, None
        worst = min(mine, key=lambda v: v["usable_bytes"])
        return worst["usable_bytes"], worst["total_bytes"]

    def create_topic(self) -> None:
        from confluent_kafka.admin import NewTopic

        topic = self.args.topic
        if topic in self.admin.list_topics(timeout=10).topics:
            self.delete_topic()
        spec = NewTopic(topic, num_partitions=1, replica_assignment=[[self.broker]], config={"segment.bytes": str(MiB)})
        deadline = time.monotonic() + 30
        while True:
            try:
                self.admin.create_topics([spec])[topic].result(timeout=15)
                return
            except Exception as exc:  # a topic being deleted cannot be created again yet
                if time.monotonic() > deadline:
                    raise DemoFailed(f"could not create topic {topic}: {exc}") from None
                time.sleep(0.5)

    def delete_topic(self) -> None:
        topic = self.args.topic
        try:
            self.admin.delete_topics([topic])[topic].result(timeout=15)
        except Exception as exc:
            print(f"  (could not delete topic {topic}: {exc})")
            return
        deadline = time.monotonic() + 30
        while topic in self.admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
            time.sleep(0.2)

    def set_retention(self, retention_bytes: int) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        resource = ConfigResource(
            ResourceType.TOPIC,
            self.args.topic,
            incremental_configs=[ConfigEntry("retention.bytes", str(retention_bytes), incremental_operation=AlterConfigOpType.SET)],
        )
        self.admin.incremental_alter_configs([resource])[resource].result(timeout=15)

    # ------------------------------------------------------------------ the loop

    def produce_for(self, seconds: float) -> None:
        """Offer `rate` bytes/s for `seconds`; what the queue cannot take is not offered."""
        end = time.monotonic() + seconds
        while (now := time.monotonic()) < end:
            self.credit = min(self.credit + (now - self.last_tick) * self.rate, self.rate)  # at most 1 s of backlog
            self.last_tick = now
            while self.credit >= MESSAGE_BYTES:
                try:
                    self.producer.produce(self.args.topic, self.payload, on_delivery=self.meter.on_delivery)
                except BufferError:
                    break  # the broker is holding us back: the queue is full
                self.credit -= MESSAGE_BYTES
            self.producer.poll(min(TICK, max(0.0, end - time.monotonic())))

    def second(self) -> Sample:
        before = self.meter.acked
        self.meter.throttle_ms.clear()
        t0 = time.monotonic()
        self.produce_for(1.0)
        rate = (self.meter.acked - before) / (time.monotonic() - t0)
        try:
            d = self.decision()
            usable, total = self.volume()
            quota = self.quota()
            state, factor, source = d["state"], float(d["factor"]), d["source"]
        except httpx.HTTPError as exc:
            print(f"  (service not answering: {exc})")
            state, factor, source, usable, total, quota = "?", float("nan"), "?", None, None, None
        sample = Sample(time.monotonic() - self.started, state, factor, source, usable, total, rate,
                        max(self.meter.throttle_ms, default=0), quota)
        previous = self.samples[-1].state if self.samples else None
        self.samples.append(sample)
        if previous is not None and previous != state:
            print(f"  -> decision {previous} -> {state} at {sample.at:.0f} s")
        print(
            f"[{sample.at:5.0f} s] broker {self.broker}: {_mib(usable)} usable of {_mib(total)} | "
            f"{state:<8} factor {factor:.2f} ({source}) | quota {_rate(quota)} | producer {_rate(rate)}"
            + (f", throttled up to {sample.throttle_ms} ms" if sample.throttle_ms else ""),
            flush=True,
        )
        return sample

    def until(self, done, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.second()):
            if time.monotonic() > deadline:
                raise DemoFailed(f"{what} did not happen within {timeout:.0f} s")

    def run(self) -> int:
        args = self.args
        d = self.decision()
        if self.broker is None:
            volumes = self.http.get("/volumes").json()["volumes"]
            if not volumes:
                raise DemoFailed("the service has no volume observed yet; is it pointed at this cluster?")
            self.broker = min(v["broker_id"] for v in volumes)
        limits = d["limits"]

        def level(value):
            if value is None:
                return "none"
            return _mib(value) + " usable" if limits["kind"] == "min-available-bytes" else f"ratio {value:g}"

        print(
            f"service {args.service}: {d['state']} (factor {d['factor']}), hard limit {level(limits['hard'])}, "
            f"soft limit {level(limits['soft'])}"
        )
        print(f"creating topic {args.topic} with its one partition on broker {self.broker}; producing {args.rate:g} MiB/s")
        self.create_topic()
        try:
            print("\n== filling broker", self.broker, "==")
            self.until(lambda s: s.state == "PAUSE", args.timeout, "PAUSE")
            self.produce_seconds_with_samples(args.hold)
            print(f"\n== freeing: retention.bytes=1 MiB on {args.topic} ==")
            self.set_retention(MiB)
            freed_at = len(self.samples)
            self.until(lambda s: s.state == "OPEN" and s.rate >= 0.8 * self.rate, args.timeout, "recovery")
            self.produce_seconds_with_samples(args.recover)
        finally:
            self.producer.purge()
            self.producer.flush(5)
            print(f"\ndeleting topic {args.topic}")
            self.delete_topic()
        self.summary(freed_at)
        return 0

    def produce_seconds_with_samples(self, seconds: float) -> None:
        for _ in range(int(seconds)):
            self.second()

    def summary(self, freed_at: int) -> None:
        filling, freeing = self.samples[:freed_at], self.samples[freed_at:]

        def first(samples, state):
            return next((s.at for s in samples if s.state == state), None)

        healthy = [s for s in filling if s.state == "OPEN"]
        throttled = [s for s in filling if s.state == "THROTTLE"]
        # Each sample is the second before the decision was read: the first PAUSE sample was mostly
        # written before the pause, the next is its first whole second, which can still carry
        # acknowledgements of requests let in before; the floor shows from the one after.
        paused = [s for s in filling if s.state == "PAUSE"][2:]
        recovered = [s for s in freeing if s.state == "OPEN"]
        print("\nsummary")
        print(f"  healthy   producer {_rate(_mean([s.rate for s in healthy]))} (offered {_rate(self.rate)})")
        if throttled:
            quotas = [s.quota for s in throttled if s.quota is not None]
            print(
                f"  THROTTLE  {throttled[0].at:.0f} s to {throttled[-1].at:.0f} s: factor {throttled[0].factor:.2f} down to "
                f"{throttled[-1].factor:.2f}, quota {_rate(max(quotas, default=None))} down to {_rate(min(quotas, default=None))}"
            )
            for stretch in ramp_stretches(throttled):
                print(f"            {stretch}")
        floor = min((s.quota for s in paused if s.quota is not None), default=None)
        print(f"  PAUSE     from {first(filling, 'PAUSE'):.0f} s, producer {_rate(_mean([s.rate for s in paused]))} from its third second"
              f" (quota floor {_rate(floor)})")
        print(f"  freed     OPEN again at {first(freeing, 'OPEN'):.0f} s, producer {_rate(_mean([s.rate for s in recovered[-3:]]))}")


RAMP_STRETCH_SECONDS = 4


@dataclass(frozen=True)
class Stretch:
    """A few seconds of THROTTLE: the mean factor, quota and producer rate over them. A second's
    rate swings with Kafka's throttles (it mutes a connection for up to a second at a time);
    over a few seconds the producer is seen to follow its quota down."""

    start: float
    end: float
    factor: float
    quota: float | None
    rate: float

    def __str__(self) -> str:
        quota = "unlimited" if self.quota is None else _rate(self.quota)
        return f"{self.start:3.0f}-{self.end:3.0f} s  factor {self.factor:.2f}  quota {quota:>11}  producer {_rate(self.rate):>11}"


def ramp_stretches(samples: list[Sample], seconds: int = RAMP_STRETCH_SECONDS) -> list[Stretch]:
    """Consecutive samples in stretches of ``seconds`` (the last may be shorter)."""
    stretches = []
    for i in range(0, len(samples), seconds):
        part = samples[i : i + seconds]
        quotas = [s.quota for s in part if s.quota is not None]
        stretches.append(Stretch(
            part[0].at, part[-1].at, _mean([s.factor for s in part]),
            _mean(quotas) if len(quotas) == len(part) else None, _mean([s.rate for s in part]),
        ))
    return stretches


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="throttle-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True, help="the cluster the service observes")
    parser.add_argument("--service", default="http://127.0.0.1:8080", help="base URL of the service")
    parser.add_argument("--broker", type=int, help="broker whose volume to fill (default: the lowest id)")
    parser.add_argument("--topic", default="throttle-demo")
    parser.add_argument("--rate", type=float, default=3.0, help="offered load in MiB/s (default 3)")
    parser.add_argument("--hold", type=float, default=8.0, help="seconds to keep producing while paused")
    parser.add_argument("--recover", type=float, default=8.0, help="seconds to keep producing after recovery")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds allowed for each phase")
    args = parser.parse_args(argv)
    try:
        demo = Demo(args)
        raise SystemExit(demo.run())
    except DemoFailed as exc:
        print(f"throttle-demo: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except httpx.HTTPError as exc:
        print(f"throttle-demo: the service at {args.service} does not answer: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
