"""History format 2: rows in proportion to what happened, read back as the full rows of format 1."""

from __future__ import annotations

import bz2
import gzip
import json
from datetime import UTC, datetime

import pytest

from app.history.compact import Compaction, Compactor, expand
from app.history.files import HistoryFiles, Retention, file_bytes
from app.history.rows import ROW_ENCODER, round_rows
from app.history.schema import FIELD_NAMES, ROUND_FIELDS, SHARED_FIELDS, Codec
from app.observation.model import KeptReason
from spark.reading.schema import RULES
from tests.report.synthetic import CHECK_INTERVAL, TOTAL, service_rounds, write_service_history

START = datetime(2026, 6, 1, 9, 40, tzinfo=UTC)
ROUNDS = 200
# What a row between two of its volume's rows repeats from the first (the observation); every
# other field is the round's own.
OBSERVATION = ("usable_bytes", "available_ratio", "observed_at", "observation_age_seconds", "fill_rate_bytes_per_second", "seconds_to_hard_limit")


def key(row: dict) -> tuple:
    return (row["time"], row["broker_id"] if row["broker_id"] is not None else -1, row["log_dir"] or "", row["holds"] or "")


def both(compaction: Compaction) -> tuple[list[dict], list[dict], list[dict]]:
    """Format 1's rows, format 2's lines and those lines expanded, of the same rounds."""
    compactor = Compactor(compaction)
    full, compact = [], []
    for round_, decision in service_rounds(START, ROUNDS):
        full += round_rows(round_, decision, CHECK_INTERVAL)
        compact += [json.loads(ROW_ENCODER.encode(row)) for row in compactor.rows(round_, decision, CHECK_INTERVAL)]
    return full, compact, list(expand(compact))


def test_every_round_has_its_round_row_and_volume_rows_only_when_due():
    full, compact, _ = both(Compaction(keyframe_seconds=300, usable_share=0.01))
    rounds = [row for row in compact if row["row"] == "round"]
    assert len(rounds) == ROUNDS and all(row.keys() >= {"time", "state", "source", "volumes", *ROUND_FIELDS} for row in rounds)
    volume_rows = [row for row in compact if row["row"] == "volume"]
    assert len(volume_rows) < len(full) / 2  # a busy simulation: the saw-tooths move 0.5% of their volume a round
    # not ok: a row every round; the hour's first round is a keyframe; shared values only when they change
    breaching = {r["time"] for r in full if (r["broker_id"], r["log_dir"], r["volume_status"]) == (1, "/data/a", "breaching")}
    assert breaching and breaching <= {r["time"] for r in volume_rows if (r["broker_id"], r["log_dir"]) == (1, "/data/a")}
    keyframes = [r["time"] for r in rounds if r.get("keyframe")]
    assert keyframes == ["2026-06-01T09:40:00.000Z", "2026-06-01T10:00:00.000Z", "2026-06-01T11:00:00.000Z", "2026-06-01T12:00:00.000Z"]
    shared = [r["time"] for r in rounds if r.get("shared")]
    assert shared == sorted({*keyframes, "2026-06-01T11:40:00.000Z"})  # round 120: the soft limit changed
    assert not any(name in row for row in volume_rows for name in (*ROUND_FIELDS, *SHARED_FIELDS))
    # a volume that leaves gets a gone row; an ok volume is written at least every keyframe interval
    assert [r["time"] for r in compact if r["row"] == "gone" and (r["broker_id"], r["log_dir"]) == (4, "/data/b")] == ["2026-06-01T12:40:00.000Z"]
    times = [datetime.fromisoformat(r["time"]).timestamp() for r in volume_rows if (r["broker_id"], r["log_dir"]) == (2, "/data/a")]
    assert max(b - a for a, b in zip(times, times[1:])) <= 300


def test_with_a_row_every_round_the_expanded_history_is_format_1_exactly():
    full, compact, expanded = both(Compaction(keyframe_seconds=0))
    assert sorted(expanded, key=key) == sorted(full, key=key)


@pytest.mark.parametrize("share", [0.01, 0.05])
def test_the_compact_history_expands_to_format_1_with_every_decision_value_equal(share):
    full, compact, expanded = both(Compaction(keyframe_seconds=300, usable_share=share))
    assert [key(r) for r in sorted(expanded, key=key)] == [key(r) for r in sorted(full, key=key)]  # the same rows
    for want, got in zip(sorted(full, key=key), sorted(expanded, key=key)):
        assert {n: got[n] for n in FIELD_NAMES if n not in OBSERVATION} == {n: want[n] for n in FIELD_NAMES if n not in OBSERVATION}
        if got["usable_bytes"] != want["usable_bytes"]:  # a round between two rows: within the share, and ok
            assert abs(got["usable_bytes"] - want["usable_bytes"]) <= share * TOTAL and want["volume_status"] == "ok"
        if want["volume_status"] != "ok" or want["kept"] is not None:
            assert got == want  # not ok, or a kept observation: exact


def test_a_failed_write_makes_the_next_round_a_keyframe():
    compactor = Compactor(Compaction())
    pairs = iter(service_rounds(START, 3))
    compactor.rows(*next(pairs), CHECK_INTERVAL)
    assert [r["row"] for r in compactor.rows(*next(pairs), CHECK_INTERVAL)] == ["round"]
    compactor.reset()
    rows = compactor.rows(*next(pairs), CHECK_INTERVAL)
    assert rows[0]["keyframe"] and rows[0]["shared"] and len(rows) == 1 + 8


@pytest.mark.parametrize("codec", list(Codec))
def test_the_writer_writes_format_2_and_compresses_the_closed_hours(tmp_path, codec):
    write_service_history(tmp_path, START, ROUNDS, Compaction(), codec=codec)
    names = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("history-*"))
    assert names == [
        f"date=2026-06-01/history-09{codec.suffix}",
        f"date=2026-06-01/history-10{codec.suffix}",
        f"date=2026-06-01/history-11{codec.suffix}",
        "date=2026-06-01/history-12.jsonl",
    ]
    lines = []
    for path in sorted(tmp_path.rglob("history-*")):
        lines += [json.loads(line) for line in file_bytes(path).decode().splitlines()]
    full, compact, expanded = both(Compaction())
    assert lines == compact


@pytest.mark.parametrize("codec", list(Codec))
def test_a_restart_starts_with_a_keyframe_and_a_late_round_of_a_closed_hour_is_added_to_its_file(tmp_path, codec):
    files = HistoryFiles(tmp_path, Retention(3650, 1 << 40), wall_clock=lambda: START.timestamp(), codec=codec)
    files.append(b'{"a":1}\n', START.timestamp())
    files.append(b'{"a":2}\n', START.timestamp() + 3600)  # the 09:00 hour closes: compressed
    files.append(b'{"a":3}\n', START.timestamp())  # a round of 09:00 comes late: its own member
    files.append(b'{"a":4}\n', START.timestamp() + 3600)
    files.close()
    old = tmp_path / "date=2026-06-01" / f"history-09{codec.suffix}"
    assert file_bytes(old) == b'{"a":1}\n{"a":3}\n'


@pytest.mark.parametrize("codec", list(Codec))
def test_a_crash_after_the_plain_file_went_puts_the_staged_copy_in_place(tmp_path, codec):
    folder = tmp_path / "date=2026-06-01"
    folder.mkdir()
    # a copy staged by the other codec (the setting changed since) is put in place too
    other = next(c for c in Codec if c is not codec)
    (folder / f".history-08{other.suffix}.tmp").write_bytes(gzip.compress(b'{"a":0}\n') if other is Codec.GZIP else bz2.compress(b'{"a":0}\n'))
    (folder / f".history-09{codec.suffix}.tmp").write_bytes(gzip.compress(b'{"a":1}\n') if codec is Codec.GZIP else bz2.compress(b'{"a":1}\n'))
    (folder / f".history-10{codec.suffix}.tmp").write_bytes(b"\x1f\x8b half")  # its plain file is still there
    (folder / "history-10.jsonl").write_bytes(b'{"a":2}\n{"a":')  # and ends in a truncated line
    HistoryFiles(tmp_path, Retention(3650, 1 << 40), wall_clock=lambda: START.timestamp() + 7200, codec=codec).close()
    assert sorted(p.name for p in folder.iterdir()) == [f"history-08{other.suffix}", f"history-09{codec.suffix}", f"history-10{codec.suffix}"]
    assert [file_bytes(folder / f"history-{hour}{c.suffix}") for hour, c in (("08", other), ("09", codec), ("10", codec))] == [
        b'{"a":0}\n',
        b'{"a":1}\n',
        b'{"a":2}\n{"a":\n',
    ]


def test_kept_accepts_exactly_the_reasons_the_service_writes():
    assert set(RULES["kept"].allowed) == {reason.value for reason in KeptReason}


def test_a_row_that_cannot_be_encoded_is_dropped_alone_and_its_volume_written_when_it_can_be(tmp_path):
    from app.history.writer import HistoryCounters, HistoryWriter
    from app.observation.model import ObservationRound, VolumeObservation
    from tests.unit.test_history import decided

    dropped = []
    counters = HistoryCounters(lambda n: None, lambda reason, n: dropped.append((reason, n)), lambda n: None)
    files = HistoryFiles(tmp_path, Retention(3650, 1 << 40), wall_clock=lambda: START.timestamp())
    writer = HistoryWriter(files, CHECK_INTERVAL, counters, compaction=Compaction())
    writer.start()
    at = START.timestamp()
    for i, log_dir in enumerate([b"/c", "/c"]):  # not text (cannot be encoded), then text again
        t = at + 60 * i
        round_ = ObservationRound(t - 1, t, (1, 3), (VolumeObservation(1, "/a", TOTAL, TOTAL // 2, t), VolumeObservation(3, log_dir, TOTAL, TOTAL // 2, t)))  # type: ignore[arg-type]
        writer.submit(round_, decided(round_))
    writer.close()
    rows = [json.loads(line) for line in next(tmp_path.rglob("history-*.jsonl")).read_text().splitlines()]
    assert dropped == [("write_error", 1)]
    assert [(r["row"], r.get("broker_id")) for r in rows] == [("round", None), ("volume", 1), ("round", None), ("volume", 3)]


class _ReferenceCompactor(Compactor):
    """The per-volume test as it reads in ``_due``, for every data volume (how the compactor
    decided before its ok volumes were tested in place): the rows must be the same."""

    def _data_rows(self, time, at, view, round_, decision, seen):
        from app.history.compact import DATA, VOLUME, _Provenance, _time_to_full, _volume_rule
        from app.observation.model import ADMIN_API

        evaluation = decision.evaluation
        verdicts = (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged) if evaluation else ()
        listed = {v.volume.key: v for v in verdicts}
        provenance = _Provenance(round_)
        rows = []
        for volume in view:
            key = (volume.broker_id, volume.log_dir, DATA)
            seen.add(key)
            verdict = listed.get(volume.key)
            status = verdict.status.value if verdict is not None else "ok"
            factor = verdict.factor if verdict is not None else 1.0
            kept = provenance.kept(volume)
            rule = _volume_rule(verdict)
            signature = (status, factor, kept, volume.error, rule, volume.total_bytes, volume.observed_by)
            c = self.compaction
            if not self._due(key, signature, status, volume.usable_bytes, volume.total_bytes, at, c.keyframe_seconds, c.usable_share):
                continue
            observed_at, age = provenance.time_and_age(volume)
            rate, seconds = _time_to_full(decision, volume)
            row = {
                "time": time, "row": VOLUME, "broker_id": volume.broker_id, "log_dir": volume.log_dir,
                "total_bytes": volume.total_bytes, "usable_bytes": volume.usable_bytes, "log_dir_error": volume.error,
                "observed_at": observed_at, "observation_age_seconds": age, "kept": kept, "volume_status": status,
                "volume_factor": factor, "fill_rate_bytes_per_second": rate, "seconds_to_hard_limit": seconds,
                "volume_rule": rule, "holds": DATA, "observed_by": None if volume.observed_by == ADMIN_API else volume.observed_by,
            }
            rows.append({n: v for n, v in row.items() if v is not None})
        return rows


@pytest.mark.parametrize("compaction", [Compaction(), Compaction(keyframe_seconds=120, usable_share=0.05), Compaction(usable_share=0.0)])
def test_the_rows_are_those_of_the_per_volume_test(compaction):
    fast, reference = Compactor(compaction), _ReferenceCompactor(compaction)
    for round_, decision in service_rounds(START, ROUNDS):
        assert fast.rows(round_, decision, CHECK_INTERVAL) == reference.rows(round_, decision, CHECK_INTERVAL)


def test_an_ok_volume_moving_exactly_its_share_is_not_due_and_one_byte_more_is():
    from app.decision.decider import ThrottleDecider
    from app.decision.policy import LimitKind, StoragePolicy
    from app.observation.model import ObservationRound, VolumeObservation

    total, share = 1000 * 2**20, 0.01
    began = START.timestamp()
    decider = ThrottleDecider(StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 1), 300.0, 0.0, started_at=began - 1)
    compactor, reference = Compactor(Compaction(usable_share=share)), _ReferenceCompactor(Compaction(usable_share=share))
    moves = {"/a": [0, int(share * total), int(share * total) + 1], "/b": [0, 0, 0], "/c": [0, 5, 5]}
    written = []
    for i in range(3):
        at = began + 60 * i
        totals = {"/a": total, "/b": total, "/c": -1}  # /c: capacity unknown, not judged
        observations = tuple(VolumeObservation(1, d, totals[d], total // 2 - moves[d][i] if totals[d] > 0 else -1 - moves[d][i], at) for d in moves)
        round_ = ObservationRound(at - 0.5, at, (1,), observations)
        decider.apply_round(round_)
        decision = decider.decision(at)
        rows = compactor.rows(round_, decision, 60.0)
        assert rows == reference.rows(round_, decision, 60.0)
        written.append([(r["log_dir"], r["usable_bytes"]) for r in rows if r["row"] == "volume"])
    assert [d for d, _ in written[1]] == ["/c"]  # /a moved exactly its share: not due (/c, unjudged: every round)
    assert ("/a", total // 2 - int(share * total) - 1) in written[2]  # one byte more: due
    assert all(d != "/b" for d, _ in written[2])  # unmoved
