"""The reader against a reference written here in plain Python: every line checked against its
fields' declared JSON types and allowed values, the same lines kept with the same values, the
same lines skipped for the same reasons, whatever the lines hold.

The reference follows docs/history-and-report.md, not the reader's code: a line is skipped as
``unreadable`` when it is not a JSON object, or a number or boolean field holds another JSON
type (an integer out of its type's range, NaN or Infinity included); otherwise for the first field, in
the declared order, that is missing though required, not text, not a full instant, not an
allowed value or out of range (a number too large for a double included); last, for a volume named by only one of broker_id and log_dir.
Fields not declared are not read. As Spark's JSON reader does, blank lines are not lines and
what follows a line's first JSON value is not read."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.history.compact import expand
from app.history.schema import FIELD_NAMES, HISTORY_FIELDS
from spark.reading.history import SKIP_REASON, read_history, skipped_by_reason
from spark.reading.schema import INSTANT_PATTERN, RULES, UNUSED_FIELDS, Rule, skip_reasons

from .synthetic import at, no_volume_row, volume_row

KIND = {field.name: field.kind for field in HISTORY_FIELDS}
INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
READ_FIELDS = [name for name in FIELD_NAMES if name not in UNUSED_FIELDS]


class Unreadable(Exception):
    pass


def _no_constants(name: str):
    raise Unreadable(name)  # NaN, Infinity: not JSON


def _fits_its_kind(kind: str, value) -> bool:
    if kind in INT_RANGE:
        low, high = INT_RANGE[kind]
        return type(value) is int and low <= value <= high
    if kind == "double":
        return type(value) in (int, float)
    if kind == "boolean":
        return type(value) is bool
    return True  # text and timestamps: any JSON value reads as their text


def _problem(name: str, value) -> str | None:
    rule, kind = RULES.get(name, Rule()), KIND[name]
    if value is None:
        return "missing" if rule.required else None
    if kind == "timestamp":
        if not (isinstance(value, str) and re.match(INSTANT_PATTERN, value)):
            return "not an instant"
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return "not an instant"
    elif kind == "string" and not rule.allowed and not isinstance(value, str):
        return "not text"
    if rule.allowed and value not in rule.allowed:
        return "not allowed"
    if kind == "double" and not math.isfinite(value):
        return "out of range"  # a literal too large for a double (1e999)
    if kind in ("int", "long", "double"):
        low_ok = rule.minimum is None or (value > rule.minimum if rule.above_minimum else value >= rule.minimum)
        if not low_ok or (rule.maximum is not None and value > rule.maximum):
            return "out of range"
    return None


def reference_read(text: str) -> tuple[list[tuple], Counter]:
    """The rows kept (as ``kept_row`` tuples) and the lines skipped, by reason."""
    kept, skipped = [], Counter()
    decoder = json.JSONDecoder(parse_constant=_no_constants)
    for line in text.split("\n"):
        if not line.strip(" \t"):
            continue
        try:
            row, _ = decoder.raw_decode(line.lstrip(" \t"))
        except (ValueError, Unreadable):
            skipped["unreadable"] += 1
            continue
        if not isinstance(row, dict) or not all(_fits_its_kind(KIND[name], row.get(name)) for name in FIELD_NAMES if row.get(name) is not None):
            skipped["unreadable"] += 1
            continue
        reason = next((f"{name}: {problem}" for name in FIELD_NAMES if (problem := _problem(name, row.get(name)))), None)
        if reason is None and (row.get("broker_id") is None) != (row.get("log_dir") is None):
            reason = "volume: broker_id and log_dir not both given"
        if reason:
            skipped[reason] += 1
            continue
        values = {name: row.get(name) for name in READ_FIELDS}
        if values["observed_by"] is None and values["broker_id"] is not None:  # rows before the field
            values["observed_by"] = "node-report" if "metadata" in (values["holds"] or "") else "admin-api"
        values["time"] = round(datetime.fromisoformat(values["time"]).timestamp() * 1_000_000)
        kept.append(kept_row(values))
    return kept, skipped


def kept_row(values: dict) -> tuple:
    return tuple(float(values[n]) if KIND[n] == "double" and values[n] is not None else values[n] for n in READ_FIELDS)


def spark_read(spark, tmp_path: Path, text: str) -> tuple[list[tuple], Counter]:
    history = tmp_path / "history"
    history.mkdir(exist_ok=True)
    (history / "history-00.jsonl").write_text(text)
    lines = read_history(spark, str(history), str(tmp_path / "parsed")).lines
    kept_lines = lines.filter(lines[SKIP_REASON].isNull())
    rows = kept_lines.selectExpr("unix_micros(time) AS time", *READ_FIELDS[1:]).collect()
    kept = [kept_row(row.asDict()) for row in rows]
    return kept, Counter(skipped_by_reason(lines))


def assert_same_as_the_reference(spark, tmp_path: Path, text: str) -> tuple[list[tuple], Counter]:
    expected_kept, expected_skipped = reference_read(text)
    kept, skipped = spark_read(spark, tmp_path, text)
    assert skipped == expected_skipped
    assert sorted(kept, key=repr) == sorted(expected_kept, key=repr)
    return kept, skipped


MOMENT = at(2026, 6, 1, 10, 0, 0)
GOOD = [volume_row(MOMENT, 1, "/data/a", 50 * 1024, "OPEN"), no_volume_row(MOMENT, "PAUSE", "fallback")]
# A value of every JSON type, and the near misses of each field's allowed values.
EVERY_TYPE = [None, True, False, 0, 5, -1, 2**31, 2**63, 1.5, -0.5, "", "x", "5", "1.5", "true", "NaN", [], ["observed"], {}, {"v": "ok"}]
NEAR_MISSES = {
    "time": ["2026-11-24", "2026-06-01T10:00:00", "2026-06-01 10:00:00Z", "2026-02-30T00:00:00Z", "2026-06-01T25:00:00Z", "2026-06-01T10:00:00.1234567Z", "2026-06-01T10:00:00+05:30"],
    "state": ["DRAINING", "open", "OPEN "],
    "source": ["manual", "Observed"],
    "volume_status": ["full"],
    "limit_kind": ["max-used-bytes"],
    "log_dir": ["/data/b"],
    "log_dir_error": ["KAFKA_STORAGE_ERROR"],
    "check_interval_seconds": [0, 0.0, -60.0, 30],
    "cluster_factor": [1.01, -0.01, 0],
    "seconds_to_hard_limit": [-1.0, -0.001, 0, 120.5],
    "fill_rate_bytes_per_second": [-1048576.0, 0, 1e12],
    "volume_rule": ["time to Full", "hard limit (hysteresis)", "time to full"],
    "rule": ["log dir error KAFKA_STORAGE_ERROR", "soft limit"],
}


def every_wrong_value_of_every_field() -> str:
    lines = []
    for base in GOOD:
        lines.append(json.dumps(base))
        for name in FIELD_NAMES:
            for value in EVERY_TYPE + NEAR_MISSES.get(name, []):
                lines.append(json.dumps({**base, name: value}))
            lines.append(json.dumps({k: v for k, v in base.items() if k != name}))  # the field left out
        lines.append(json.dumps({**base, "hard_limit": 1e308}).replace("1e+308", "1e999"))  # overflows to infinity
        lines.append(json.dumps({**base, "newer_field": {"any": [1]}}))  # not declared: not read
    return "\n".join(lines) + "\n"


def test_every_wrong_type_and_near_miss_of_every_field_is_skipped_as_the_reference_skips_it(spark, tmp_path):
    kept, skipped = assert_same_as_the_reference(spark, tmp_path, every_wrong_value_of_every_field())
    assert kept and skipped["unreadable"] and skipped["state: not allowed"] and skipped["log_dir: not text"]


def test_the_lines_of_the_reported_problem_are_skipped_with_their_reasons(spark, tmp_path):
    # The lines that were kept as rounds before (a volume "5", a PAUSE of 25 s that never
    # happened, a date read as midnight): each is now skipped, for the field it gets wrong.
    base = GOOD[0]
    odd = {
        "state": "DRAINING",
        "log_dir": 5,
        "source": ["observed"],
        "volume_status": {"v": "ok"},
        "volume_factor": "x",
        "cluster_factor": "zero",
        "time": "2026-11-24",
    }
    text = "".join(json.dumps({**base, field: value}) + "\n" for field, value in odd.items()) + json.dumps({**base, "source": "manual"}) + "\n"
    kept, skipped = spark_read(spark, tmp_path, text)
    assert kept == []
    assert skipped == Counter(
        {
            "state: not allowed": 1,
            "log_dir: not text": 1,
            "source: not allowed": 2,
            "volume_status: not allowed": 1,
            "unreadable": 2,
            "time: not an instant": 1,
        }
    )


def _values():
    return st.one_of(
        st.sampled_from(EVERY_TYPE + [v for values in NEAR_MISSES.values() for v in values]),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
        st.lists(st.integers(), max_size=2),
    )


@st.composite
def history_lines(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(min_value=1, max_value=40))):
        row = dict(draw(st.sampled_from(GOOD)))
        for name in draw(st.lists(st.sampled_from([*FIELD_NAMES, "extra"]), max_size=3)):
            if draw(st.booleans()):
                row[name] = draw(_values())
            else:
                row.pop(name, None)
        line = json.dumps(row)
        cut = draw(st.integers(min_value=0, max_value=len(line)))
        mutation = draw(st.sampled_from(["none", "none", "truncate", "insert", "delete"]))
        if mutation == "truncate":
            line = line[:cut]
        elif mutation == "insert":
            line = line[:cut] + draw(st.sampled_from(['"', ",", "}", "{", "]", "x", "0", " ", ":", "\\"])) + line[cut:]
        elif mutation == "delete":
            line = line[:cut] + line[cut + 1 :]
        lines.append(line)
    return "\n".join(lines) + "\n"


@settings(derandomize=True, max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example(text='{"state":"OPEN"} trailing\n\n   \n[1,2]\n5\n{"time":NaN}\n')
@given(text=history_lines())
def test_random_and_mutated_lines_are_read_as_the_reference_reads_them(spark, tmp_path, text):
    assert_same_as_the_reference(spark, tmp_path, text)


def test_a_row_inside_a_json_array_and_a_kept_reason_the_service_never_writes_are_skipped(spark, tmp_path):
    # A line holding a valid row in an array is not a JSON object: unreadable, not that row
    # (which, being a PAUSE, made a fake round and episodes).
    paused = {**GOOD[0], "state": "PAUSE", "volume_status": "breaching", "usable_bytes": 1}
    text = "".join(
        line + "\n"
        for line in (
            json.dumps([paused]),
            json.dumps([paused, paused]),
            json.dumps({**GOOD[0], "kept": "evicted"}),
            json.dumps({**GOOD[0], "kept": "fenced"}),
        )
    )
    kept, skipped = assert_same_as_the_reference(spark, tmp_path, text)
    assert skipped == Counter({"unreadable": 2, "kept: not allowed": 1}) and len(kept) == 1


def test_format_2_lines_of_an_unknown_kind_or_count_are_skipped_and_a_bad_volume_row_counts_once(spark, tmp_path):
    round_row = {"time": "2026-06-01T10:00:00.000Z", "row": "round", "volumes": 1, "state": "OPEN", "source": "observed",
                 "check_interval_seconds": 60.0, "keyframe": True, "shared": True, "limit_kind": "min-available-bytes", "hard_limit": 1.0}  # fmt: skip
    volume = {"time": "2026-06-01T10:00:00.000Z", "row": "volume", "broker_id": 1, "log_dir": "/a", "total_bytes": 100, "usable_bytes": 50, "holds": "data"}
    later = [{**round_row, "time": f"2026-06-01T10:0{i}:00.000Z", "keyframe": None, "shared": None} for i in (1, 2)]
    lines = [
        round_row,
        {**volume, "volume_status": "full"},  # skipped once, not for every round it stands for
        {**volume, "broker_id": 2, "log_dir": "/b", "volume_status": "ok"},
        *later,
        {**later[0], "row": "snapshot"},
        {**later[0], "volumes": None},
        {**later[0], "volumes": -1},
    ]
    _, skipped = spark_read(spark, tmp_path, "".join(json.dumps(line) + "\n" for line in lines))
    assert skipped == Counter({"volume_status: not allowed": 1, "row: not allowed": 1, "volumes: missing": 1, "volumes: out of range": 1})
    history = tmp_path / "history"
    rows = read_history(spark, str(history), str(tmp_path / "parsed2")).rows
    assert sorted((r["broker_id"], r["time"].minute, r["available_ratio"]) for r in rows.collect()) == [(2, 0, 0.5), (2, 1, 0.5), (2, 2, 0.5)]


def test_a_format_2_round_that_fails_a_check_gets_no_rows_and_a_metadata_volume_keeps_its_own_limits(spark, tmp_path):
    # A volume row stands in for the rounds after it: each of them gets its row only when every
    # value that row would hold passes its check, the round's and the shared values' included.
    first = {"time": "2026-06-01T10:00:00.000Z", "row": "round", "volumes": 2, "state": "OPEN", "source": "observed",
             "check_interval_seconds": 60.0, "keyframe": True, "shared": True, "limit_kind": "min-available-bytes", "hard_limit": 1.0}  # fmt: skip
    data = {"time": first["time"], "row": "volume", "broker_id": 1, "log_dir": "/a", "total_bytes": 100, "usable_bytes": 50, "holds": "data"}
    log = {**data, "log_dir": "/meta", "holds": "metadata", "limit_kind": "min-available-bytes", "hard_limit": 5.0}
    later = {**first, "keyframe": None, "shared": None}
    lines = [
        first,
        data,
        log,
        {**later, "time": "2026-06-01T10:01:00.000Z", "state": "BROKEN"},  # the round fails
        {**later, "time": "2026-06-01T10:02:00.000Z", "shared": True, "hard_limit": -1.0},  # the shared limit fails
        {**later, "time": "2026-06-01T10:03:00.000Z"},  # the failing shared limit still in force
    ]
    _, skipped = spark_read(spark, tmp_path, "".join(json.dumps(line) + "\n" for line in lines))
    assert skipped == Counter({"state: not allowed": 1, "hard_limit: out of range": 2})
    rows = read_history(spark, str(tmp_path / "history"), str(tmp_path / "parsed2")).rows
    found = sorted((r["log_dir"], r["time"].minute, r["hard_limit"], r["observation_age_seconds"]) for r in rows.collect())
    # the data volume: its own round only; the metadata volume: every round but the failing one,
    # with its own limit (and, without an observed_at, its own age, as the reference reader gives it)
    assert found == [("/a", 0, 1.0, None), ("/meta", 0, 5.0, None), ("/meta", 2, 5.0, None), ("/meta", 3, 5.0, None)]
    assert {row["observation_age_seconds"] for row in expand(lines) if row.get("log_dir") == "/meta"} == {None}


def test_every_skip_reason_the_reader_can_give_is_in_the_documented_list():
    docs = (Path(__file__).parents[2] / "docs" / "history-and-report.md").read_text()
    listed = docs[docs.index("A line is **skipped whole**") : docs.index("The first failing field")]
    listed = " ".join(listed.split())  # a reason may wrap across lines
    assert [reason for reason in skip_reasons() if f"`{reason}`" not in listed] == []
