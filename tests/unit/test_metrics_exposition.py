"""The per-volume metrics are rendered by their collector and kept between scrapes: the body is
what prometheus_client's generate_latest writes for the same families, byte for byte, after the
volumes changed, left or arrived; gzipped, it is one gzip member that decodes to that body."""

from __future__ import annotations

import gzip
import zlib

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily

from app.clock import ManualClock
from app.observation.model import ObservationRound, VolumeObservation
from app.server.api.conditional import accepts_gzip
from app.server.edge.exposition import exposition, gzipped_exposition
from app.server.runtime.volume_metrics import VolumeCollector

from .asgi import run_scenario
from .exposition import make_app


class _Reference:
    """The per-volume families as generate_latest formats them (the collector before it
    rendered its own text)."""

    def __init__(self, volumes: list[VolumeObservation]) -> None:
        self.volumes = volumes

    def collect(self):
        available = GaugeMetricFamily("kafka_throttle_volume_available_bytes", "Usable bytes of a log dir's volume", labels=["broker_id", "log_dir"])
        total = GaugeMetricFamily("kafka_throttle_volume_total_bytes", "Total bytes of a log dir's volume", labels=["broker_id", "log_dir"])
        for volume in self.volumes:
            if volume.capacity_known:
                available.add_metric([str(volume.broker_id), volume.log_dir], volume.usable_bytes)
                total.add_metric([str(volume.broker_id), volume.log_dir], volume.total_bytes)
        yield available
        yield total


def _registries(volumes: list[VolumeObservation]) -> tuple[CollectorRegistry, CollectorRegistry]:
    """The collector under test and the reference, each between two plain gauges."""
    registries = CollectorRegistry(), CollectorRegistry()
    for registry, collector in zip(registries, (VolumeCollector(lambda: volumes), _Reference(volumes))):
        Gauge("before_volumes", "A family before", registry=registry).set(3)
        registry.register(collector)
        Gauge("after_volumes", "A family after", registry=registry).set(0.25)
    return registries


ODD_DIRS = ['/data/plain', '/data/with "quotes"', "/data/back\\slash", "/data/new\nline", "/dätä/ünïcode"]


def test_the_rendered_volumes_are_what_generate_latest_writes_through_changes_departures_and_arrivals():
    volumes = [
        VolumeObservation(broker, log_dir, total, usable, 1.0)
        for broker in (1, 22, 333)
        for log_dir, total, usable in zip(ODD_DIRS, (0, 999_999, 1_000_000, 1_099_511_627_776, 10**16 + 8), (0, 7, 1_234_567, 10**15, 10**16))
    ] + [VolumeObservation(4, "/data/unknown", -1, -1, 1.0), VolumeObservation(5, "/data/offline", -1, -1, 1.0, error="KAFKA_STORAGE_ERROR")]
    rendered, reference = _registries(volumes)
    first = exposition(rendered)
    assert first == generate_latest(reference)
    assert b"/data/unknown" not in first and b'log_dir="/data/with \\"quotes\\""' in first
    assert exposition(rendered) == first  # the same observations: the same text

    volumes[0] = VolumeObservation(1, ODD_DIRS[0], 500, 250, 2.0)  # both figures changed
    volumes[1] = VolumeObservation(1, ODD_DIRS[1], 999_999, 8, 2.0)  # usable bytes changed
    volumes[2] = VolumeObservation(1, ODD_DIRS[2], 1_000_000, 1_234_567, 2.0)  # same figures, observed later
    del volumes[5]  # broker 22's first log dir left
    volumes.append(VolumeObservation(6, "/data/new", 2**60, 2**59, 2.0))  # a broker arrived
    volumes[3:5] = volumes[3:5][::-1]  # answered in another order
    changed = exposition(rendered)
    assert changed == generate_latest(reference)
    assert changed != first

    volumes.clear()
    assert exposition(rendered) == generate_latest(reference)


def test_new_observations_with_the_same_figures_keep_the_rendered_families_and_their_gzip_blocks():
    volumes = [VolumeObservation(b, "/data", 1000, 500 + b, 1.0) for b in range(1, 50)]
    collector = VolumeCollector(lambda: volumes)
    first = list(collector.collect())
    blocks = [family.deflated for family in first]
    volumes = [VolumeObservation(v.broker_id, v.log_dir, v.total_bytes, v.usable_bytes, 2.0) for v in volumes]
    again = list(collector.collect())
    assert [id(f) for f in again] == [id(f) for f in first] and [f.deflated for f in again] == blocks
    volumes[0] = VolumeObservation(1, "/data", 1000, 1, 3.0)
    changed = list(collector.collect())
    assert changed[0] is not first[0] and b'broker_id="1",log_dir="/data"} 1.0' in changed[0].text
    assert changed[1] is first[1]  # the total bytes did not change: that family is kept


def test_a_rendered_family_still_reads_as_samples_for_any_other_reader_of_the_registry():
    volumes = [VolumeObservation(7, ODD_DIRS[1], 1000, 10, 1.0)]
    rendered, reference = _registries(volumes)
    assert generate_latest(rendered) == generate_latest(reference) == exposition(rendered)


def test_the_gzipped_exposition_is_one_member_that_decodes_to_the_body_and_reuses_the_rendered_blocks():
    volumes = [VolumeObservation(b, f"/data/{d}", 10**12, 10**11 + b * d, 1.0) for b in range(1, 200) for d in range(12)]
    rendered, _ = _registries(volumes)
    body = exposition(rendered)
    zipped = gzipped_exposition(rendered)
    assert gzip.decompress(zipped) == body
    single_member = zlib.decompressobj(zlib.MAX_WBITS | 16)  # as httpx and many clients decode
    assert single_member.decompress(zipped) == body and single_member.eof and single_member.unused_data == b""
    assert len(zipped) < len(body) / 5
    volumes[0] = VolumeObservation(1, "/data/0", 10**12, 1, 2.0)
    assert gzip.decompress(gzipped_exposition(rendered)) == exposition(rendered) != body


def test_gzip_is_taken_when_named_or_by_a_wildcard_and_not_when_refused():
    assert accepts_gzip("gzip") and accepts_gzip("deflate, GZIP;q=0.5") and accepts_gzip("br, *")
    assert not accepts_gzip(None) and not accepts_gzip("") and not accepts_gzip("identity")
    assert not accepts_gzip("gzip;q=0") and not accepts_gzip("gzip;q=0, *") and not accepts_gzip("*;q=0")


def test_a_scrape_is_gzipped_only_for_a_scraper_that_takes_it_and_both_carry_the_same_volumes():
    clock = ManualClock()

    async def scrape_both(client, loop, clock):
        now = clock()
        observations = tuple(VolumeObservation(b, f"/data/{d}", 1000, 500 + d, now) for b in (1, 2) for d in range(3))
        loop.apply_round(ObservationRound(now, now, (1, 2), observations))
        zipped = await client.get("/metrics", headers={"Accept-Encoding": "gzip"})
        plain = await client.get("/metrics", headers={"Accept-Encoding": "identity"})
        return zipped, plain

    zipped, plain = run_scenario(make_app(clock), clock, scrape_both)
    assert zipped.headers["content-encoding"] == "gzip" and "content-encoding" not in plain.headers
    assert zipped.headers["vary"] == plain.headers["vary"] == "Accept-Encoding"

    def volume_lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("kafka_throttle_volume_")]

    assert volume_lines(zipped.text) == volume_lines(plain.text)
    assert len(volume_lines(plain.text)) == 12
    assert 'kafka_throttle_volume_available_bytes{broker_id="2",log_dir="/data/2"} 502.0' in plain.text


def test_a_byte_count_is_written_as_generate_latest_writes_it():
    import random

    from prometheus_client.utils import floatToGoString

    from app.server.runtime.volume_metrics import sample_value

    edges = [0, 1, 9, 10, 999_999, 1_000_000, 1_000_001, 10**7, 1_020_000_000, 10**14, 10**15 - 1, 10**15, 2**53 + 1, -1, 0.5, 1e300]
    drawn = [random.Random(seed).randrange(10 ** random.Random(seed).randrange(1, 16)) for seed in range(5000)]
    assert [sample_value(v) for v in edges + drawn] == [floatToGoString(v) for v in edges + drawn]


def test_a_volume_whose_labels_change_is_written_under_its_new_labels_only():
    volumes = [VolumeObservation(b, f"/data/{d}", 10**12, 10**11 + b + d, 1.0) for b in (1, 2) for d in range(3)]
    rendered, reference = _registries(volumes)
    exposition(rendered)
    volumes[1] = VolumeObservation(1, '/data/renamed "1"', 10**12, 10**11 + 2, 2.0)  # same figures, another log dir
    volumes[4] = VolumeObservation(7, "/data/1", 10**12, 10**11 + 3, 2.0)  # another broker id
    text = exposition(rendered)
    assert text == generate_latest(reference)
    assert b'broker_id="1",log_dir="/data/renamed \\"1\\""} 1.00000000002e+11' in text
    assert b'broker_id="7",log_dir="/data/1"}' in text
    assert b'log_dir="/data/1"' not in text.replace(b'broker_id="7",log_dir="/data/1"', b"")


def test_a_volume_that_leaves_takes_its_lines_with_it_and_comes_back_with_its_new_figures():
    volumes = [VolumeObservation(b, "/data", 10**12, 10**11 + b, 1.0) for b in range(1, 6)]
    rendered, reference = _registries(volumes)
    exposition(rendered)
    gone = volumes.pop(2)
    text = exposition(rendered)
    assert text == generate_latest(reference) and b'broker_id="3"' not in text
    assert text.count(b"kafka_throttle_volume_available_bytes{") == text.count(b"kafka_throttle_volume_total_bytes{") == 4
    volumes.append(VolumeObservation(gone.broker_id, gone.log_dir, 10**12, 5, 2.0))  # back, nearly full
    text = exposition(rendered)
    assert text == generate_latest(reference)
    assert text.endswith(b'kafka_throttle_volume_total_bytes{broker_id="3",log_dir="/data"} 1e+12\n# HELP after_volumes A family after\n# TYPE after_volumes gauge\nafter_volumes 0.25\n')
    assert b'kafka_throttle_volume_available_bytes{broker_id="3",log_dir="/data"} 5.0\n' in text


def test_volumes_handed_over_in_another_order_are_written_in_that_order():
    volumes = [VolumeObservation(b, f"/data/{d}", 10**12, 10**11 + b * 10 + d, 1.0) for b in range(1, 4) for d in range(2)]
    rendered, reference = _registries(volumes)
    first = exposition(rendered)
    volumes.reverse()
    volumes[:] = [VolumeObservation(v.broker_id, v.log_dir, v.total_bytes, v.usable_bytes, 2.0) for v in volumes]
    again = exposition(rendered)
    assert again == generate_latest(reference) and again != first
    assert again.index(b'available_bytes{broker_id="3"') < again.index(b'available_bytes{broker_id="1"')


def test_a_volume_whose_capacity_becomes_unknown_leaves_the_bytes_series_until_it_is_known_again():
    volumes = [VolumeObservation(b, "/data", 1000, 500 + b, 1.0) for b in range(1, 4)]
    rendered, reference = _registries(volumes)
    exposition(rendered)
    volumes[1] = VolumeObservation(2, "/data", -1, -1, 2.0, error="KAFKA_STORAGE_ERROR")
    text = exposition(rendered)
    assert text == generate_latest(reference) and b'broker_id="2"' not in text
    volumes[1] = VolumeObservation(2, "/data", 1000, 7, 3.0)
    assert exposition(rendered) == generate_latest(reference)


def test_a_change_of_total_bytes_alone_renders_only_that_family_again():
    volumes = [VolumeObservation(b, "/data", 1000, 500 + b, 1.0) for b in range(1, 10)]
    collector = VolumeCollector(lambda: volumes)
    available, total = collector.collect()
    volumes = [*volumes[:4], VolumeObservation(5, "/data", 2000, 505, 2.0), *volumes[5:]]  # grown
    again_available, again_total = collector.collect()
    assert again_available is available and again_total is not total
    assert b'kafka_throttle_volume_total_bytes{broker_id="5",log_dir="/data"} 2000.0\n' in again_total.text


def test_any_sequence_of_rounds_and_reports_gives_what_generate_latest_writes():
    import random

    draw = random.Random(43)
    dirs = [*ODD_DIRS, "/data/10e+5", "/data/100%"]
    figures = [0, 7, 999_999, 1_000_000, 10**7, 123_456_789_000, 10**15 - 1, 10**15, 2**53 + 1, -1]
    volumes: list[VolumeObservation] = []
    rendered, reference = _registries(volumes)
    for step in range(60):
        keys = {(v.broker_id, v.log_dir) for v in volumes}
        change = draw.choice(["arrive", "leave", "figures", "all figures", "reorder", "same", "unknown"])
        if change == "arrive" or not volumes:
            for _ in range(draw.randrange(1, 8)):
                key = (draw.randrange(1, 30), draw.choice(dirs))
                if key not in keys:
                    keys.add(key)
                    volumes.insert(draw.randrange(len(volumes) + 1), VolumeObservation(*key, 10**12, draw.randrange(10**12), step))
        elif change == "leave":
            del volumes[draw.randrange(len(volumes))]
        elif change in ("figures", "all figures", "unknown"):
            chosen = range(len(volumes)) if change == "all figures" else [draw.randrange(len(volumes))]
            for i in chosen:
                v = volumes[i]
                total, usable = (-1, -1) if change == "unknown" else (draw.choice(figures[1:-1] + [v.total_bytes]), draw.choice(figures + [draw.randrange(10**13)]))
                volumes[i] = VolumeObservation(v.broker_id, v.log_dir, total, usable, step)
        elif change == "reorder":
            draw.shuffle(volumes)
        else:
            volumes[:] = [VolumeObservation(v.broker_id, v.log_dir, v.total_bytes, v.usable_bytes, step) for v in volumes]
        assert exposition(rendered) == generate_latest(reference), (step, change)
        assert gzip.decompress(gzipped_exposition(rendered)) == generate_latest(reference)
