"""Configuration: proposal 047 property names, environment overrides, and clear errors."""

import subprocess
import sys
from datetime import timedelta

import pytest

from app.settings import ConfigurationError, load_settings
from app.settings.durations import format_duration, parse_duration
from app.settings.properties import parse_properties
from devtools.commands import run_command

P = "client.quota.callback.static."
MINIMAL = {
    "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS": "localhost:9092",
    "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_BYTES": "1000000000",
}


def write(tmp_path, text):
    path = tmp_path / "throttle.properties"
    path.write_text(text)
    return path


def problems(**kwargs):
    with pytest.raises(ConfigurationError) as caught:
        load_settings(**kwargs)
    return [str(p) for p in caught.value.problems]


def test_properties_file_uses_the_proposal_names(tmp_path):
    path = write(
        tmp_path,
        f"""# copied from a broker's server.properties
{P}storage.check.interval=PT30S
{P}kafka.admin.bootstrap.servers=kafka-0:9092,kafka-1:9092
{P}kafka.admin.security.protocol=SASL_SSL
{P}kafka.admin.sasl.mechanism=SCRAM-SHA-512
{P}kafka.admin.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="throttle" password="s3cret";
{P}throttle.factor.fallback=0.0
{P}throttle.factor.validity.duration=PT2M
{P}storage.per.volume.limit.min.available.ratio=0.01
broker.id=0
""",
    )
    s = load_settings(path, environ={})
    assert s.storage_check_interval == timedelta(seconds=30)
    assert s.kafka_admin_bootstrap_servers == "kafka-0:9092,kafka-1:9092"
    assert s.kafka_admin["security.protocol"] == "SASL_SSL"
    assert s.throttle_factor_fallback == 0.0
    assert s.throttle_factor_validity_duration == timedelta(minutes=2)
    assert s.storage_per_volume_limit_min_available_ratio == 0.01


def test_defaults_follow_the_proposal():
    s = load_settings(environ=MINIMAL)
    assert s.storage_check_interval == timedelta(minutes=1)
    assert s.throttle_factor_fallback == 1.0
    assert s.throttle_factor_validity_duration == timedelta(minutes=5)
    assert s.effective_kafka_request_timeout == timedelta(seconds=30)


def test_environment_overrides_the_file(tmp_path):
    path = write(tmp_path, f"{P}throttle.factor.fallback=0.5\n{P}storage.per.volume.limit.min.available.bytes=10\n{P}kafka.admin.bootstrap.servers=a:1\n")
    s = load_settings(path, environ={"CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK": "0.25"})
    assert s.throttle_factor_fallback == 0.25


def test_admin_properties_from_the_environment_map_underscores_to_dots():
    s = load_settings(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": ""})
    assert s.kafka_admin == {"ssl.endpoint.identification.algorithm": ""}


def test_check_interval_pt0s_disables_observation_and_needs_no_bootstrap():
    s = load_settings(environ={"CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_CHECK_INTERVAL": "PT0S", "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_BYTES": "1"})
    assert not s.observation_enabled


def test_exactly_one_hard_limit_is_required():
    lines = problems(environ={"CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS": "a:1"})
    assert len(lines) == 1 and "exactly one hard limit" in lines[0]
    both = problems(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_RATIO": "0.05"})
    assert len(both) == 2
    assert any(line.startswith(P + "storage.per.volume.limit.min.available.ratio='0.05'") for line in both)
    assert any(line.startswith(P + "storage.per.volume.limit.min.available.bytes='1000000000'") for line in both)


@pytest.mark.parametrize(
    ("variable", "value", "key", "allowed"),
    [
        ("CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK", "1.5", "throttle.factor.fallback", "[0.0, 1.0]"),
        ("CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK", "nan", "throttle.factor.fallback", "[0.0, 1.0]"),
        ("CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK", "-0.1", "throttle.factor.fallback", "[0.0, 1.0]"),
        ("CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_BYTES", "-1", "storage.per.volume.limit.min.available.bytes", ">= 0"),
        ("CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_CHECK_INTERVAL", "60s", "storage.check.interval", "ISO-8601"),
        ("CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_VALIDITY_DURATION", "PT30S", "throttle.factor.validity.duration", "longer than the check interval (PT1M)"),
        ("CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_VALIDITY_DURATION", "PT0S", "throttle.factor.validity.duration", "greater than zero"),
        ("CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS", "no-port", "kafka.admin.bootstrap.servers", "host:port"),
        ("CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SSL_TRUSTSTORE_TYPE", "JKS", "kafka.admin.ssl.truststore.type", "PEM"),
    ],
)
def test_each_bad_value_is_named_with_what_is_allowed(variable, value, key, allowed):
    lines = problems(environ={**MINIMAL, variable: value})
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{P}{key}={value!r} (from environment variable {variable})")
    assert allowed in lines[0]


def test_soft_limit_must_be_strictly_looser_and_of_the_same_kind():
    equal = problems(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_SOFT_LIMIT_MIN_AVAILABLE_BYTES": "1000000000"})
    assert "strictly greater than the hard limit" in equal[0]
    other_kind = problems(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_SOFT_LIMIT_MIN_AVAILABLE_RATIO": "0.5"})
    assert "same kind as the hard limit" in other_kind[0]
    ok = load_settings(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_SOFT_LIMIT_MIN_AVAILABLE_BYTES": "1000000001"})
    assert ok.storage_per_volume_soft_limit_min_available_bytes == 1000000001


def test_a_horizon_is_off_unless_set_and_at_least_a_minute_and_twelve_check_intervals():
    assert load_settings(environ=MINIMAL).ramp_horizon is None
    short = problems(environ={**MINIMAL, "THROTTLE_SERVICE_RAMP_HORIZON": "PT59S"})
    assert len(short) == 1 and short[0].startswith("throttle.service.ramp.horizon='PT59S'")
    assert "at least PT1M (Kafka enforces a factor over an 11 s quota window)" in short[0]
    few_rounds = problems(environ={**MINIMAL, "THROTTLE_SERVICE_RAMP_HORIZON": "PT10M"})  # the check interval is PT1M
    assert few_rounds == [
        "throttle.service.ramp.horizon='PT10M' (from environment variable THROTTLE_SERVICE_RAMP_HORIZON): "
        "allowed: a duration of at least 12 check intervals (PT12M), so that a quarter of it holds 3 observations"
    ]
    fast = {**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_CHECK_INTERVAL": "PT5S", "THROTTLE_SERVICE_RAMP_HORIZON": "PT1M"}
    assert load_settings(environ=fast).ramp_horizon == timedelta(minutes=1)


def test_request_timeout_must_be_below_the_check_interval():
    lines = problems(environ={**MINIMAL, "THROTTLE_SERVICE_KAFKA_REQUEST_TIMEOUT": "PT1M"})
    assert lines == [
        "throttle.service.kafka.request.timeout='PT1M' (from environment variable THROTTLE_SERVICE_KAFKA_REQUEST_TIMEOUT): "
        "allowed: a duration greater than zero and shorter than the check interval (PT1M)"
    ]


def test_unknown_keys_under_our_prefix_are_errors_with_a_suggestion(tmp_path):
    path = write(tmp_path, f"{P}storage.per.volume.limit.min.available.byte=5\n{P}kafka.admin.bootstrap.servers=a:1\n{P}storage.per.volume.limit.min.available.bytes=5\n")
    lines = problems(config_file=path, environ={})
    assert len(lines) == 1
    assert "did you mean client.quota.callback.static.storage.per.volume.limit.min.available.bytes" in lines[0]


def test_every_problem_is_reported_at_once():
    lines = problems(environ={"CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK": "2", "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SECURITY_PROTOCOL": "TLS"})
    assert len(lines) == 4  # fallback, hard limit missing, bootstrap missing, security.protocol


@pytest.mark.parametrize(("text", "seconds"), [("PT1M", 60), ("PT0S", 0), ("PT0.5S", 0.5), ("P1DT2H", 93600), ("pt5m", 300), ("PT1H30M", 5400)])
def test_iso_durations(text, seconds):
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["1m", "60", "PT", "P", "-PT1M", "PT1M2H", "P1M", "PT\u0663\u0660S", "PT\uff13\uff10S", "PT30\u017f", "P\u0661D"])
def test_invalid_iso_durations(text):
    # Arabic-Indic and full-width digits, and "ſ" for "S", are refused as java.time.Duration does.
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_duration_round_trips():
    for text in ("PT5M", "PT0S", "PT1H30M", "PT0.5S"):
        assert format_duration(parse_duration(text)) == text


def test_properties_syntax_follows_java_util_properties():
    parsed = parse_properties("a=1\nb : 2\nc 3\n! comment\n  # comment\nd=multi\\\n   line\ne\\=f=g\nh=\\u0041\\t\n")
    assert parsed == {"a": "1", "b": "2", "c": "3", "d": "multiline", "e=f": "g", "h": "A\t"}


def run_cli(*args, env=None):
    return run_command([sys.executable, "-m", "app", *args], 60, env=env)


def test_check_config_exits_0_when_valid_and_2_with_one_line_per_problem(tmp_path):
    good = write(tmp_path, f"{P}kafka.admin.bootstrap.servers=a:1\n{P}storage.per.volume.limit.min.available.ratio=0.1\n")
    assert run_cli("--check-config", "--config", str(good), env={"PATH": "/usr/bin"}).returncode == 0
    bad = tmp_path / "bad.properties"
    bad.write_text(f"{P}throttle.factor.fallback=7\n{P}storage.check.interval=soon\n")
    result = run_cli("--check-config", "--config", str(bad), env={"PATH": "/usr/bin"})
    assert result.returncode == 2
    lines = [line.strip() for line in result.stderr.splitlines()[1:]]
    assert any(line.startswith(f"{P}throttle.factor.fallback='7' (from {bad})") for line in lines)
    assert any(line.startswith(f"{P}storage.check.interval='soon'") for line in lines)
    assert len(lines) == 4


def test_the_service_refuses_to_start_on_bad_configuration(tmp_path):
    bad = write(tmp_path, f"{P}throttle.factor.fallback=7\n")
    result = run_cli("--config", str(bad), env={"PATH": "/usr/bin"})
    assert result.returncode == 2
    assert "throttle.factor.fallback='7'" in result.stderr


def test_excluded_principals_are_user_entries_separated_by_semicolons():
    s = load_settings(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_EXCLUDED_PRINCIPAL_NAME_LIST": "User:CN=ops,O=acme,C=DE; User:admin;"})
    assert s.excluded_principals == frozenset({"CN=ops,O=acme,C=DE", "admin"})
    lines = problems(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_EXCLUDED_PRINCIPAL_NAME_LIST": "User:admin;Group:ops"})
    assert len(lines) == 1 and "entry 'Group:ops' is not User:<name>" in lines[0]


def test_factor_types_and_quota_defaults():
    s = load_settings(environ={**MINIMAL, "THROTTLE_SERVICE_QUOTA_FACTOR_TYPES": "produce, fetch", "CLIENT_QUOTA_CALLBACK_STATIC_PRODUCE": "1048576"})
    assert s.factor_types == frozenset({"produce", "fetch"}) and s.produce == 1048576
    assert "unknown quota type 'bytes'" in problems(environ={**MINIMAL, "THROTTLE_SERVICE_QUOTA_FACTOR_TYPES": "bytes"})[0]
    for bad in ("0", "-5", "nan", "inf"):
        assert problems(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_FETCH": bad})[0].startswith(f"client.quota.callback.static.fetch='{bad}'")


def test_the_admin_token_is_never_echoed():
    lines = problems(environ={**MINIMAL, "THROTTLE_SERVICE_ADMIN_TOKEN": "short-secret"})
    assert len(lines) == 1 and "short-secret" not in lines[0] and "<hidden>" in lines[0]


TOKEN = "THROTTLE_SERVICE_ADMIN_TOKEN"
HARD_RATIO = "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_RATIO"
ORIGIN = "(from environment variable {})"


def test_a_secret_is_hidden_by_its_key_and_no_other_text_is_rewritten():
    lines = problems(environ={**MINIMAL, TOKEN: "short"})
    assert lines == [
        f"throttle.service.admin.token='<hidden>' {ORIGIN.format(TOKEN)}: "
        "allowed: a secret of at least 16 characters; unset: changes to quotas are refused (too short)"
    ]
    # A valid token that happens to be words of another problem's message leaves that message whole.
    token = "a number in [0.0, 1.0]"
    lines = problems(environ={**MINIMAL, TOKEN: token, "CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK": "2"})
    assert lines == [
        f"{P}throttle.factor.fallback='2' {ORIGIN.format('CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK')}: "
        "allowed: a number in [0.0, 1.0] (out of range)"
    ]


def test_an_invalid_hard_limit_beside_another_is_reported_with_the_conflict():
    lines = problems(environ={**MINIMAL, HARD_RATIO: "1.5"})
    ratio = f"{P}storage.per.volume.limit.min.available.ratio='1.5' {ORIGIN.format(HARD_RATIO)}: allowed: "
    bytes_origin = ORIGIN.format("CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_BYTES")
    assert sorted(lines) == sorted([
        ratio + "a number in [0.0, 1.0] (out of range)",
        ratio + f"exactly one hard limit: either {P}storage.per.volume.limit.min.available.bytes or {P}storage.per.volume.limit.min.available.ratio, not both",
        f"{P}storage.per.volume.limit.min.available.bytes='1000000000' {bytes_origin}: allowed: "
        f"exactly one hard limit: either {P}storage.per.volume.limit.min.available.bytes or {P}storage.per.volume.limit.min.available.ratio, not both",
    ])


def test_a_value_that_was_given_is_never_reported_missing():
    env = {
        "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS": "a:1",
        HARD_RATIO: "lots",
        "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_SOFT_LIMIT_MIN_AVAILABLE_BYTES": "5000",
    }
    lines = problems(environ=env)
    assert not [line for line in lines if "<missing>" in line], lines
    assert any(line.startswith(f"{P}storage.per.volume.limit.min.available.ratio='lots'") for line in lines), lines
    assert any(line.startswith(f"{P}storage.per.volume.soft.limit.min.available.bytes='5000'") and "same kind as the hard limit (ratio)" in line for line in lines), lines


def test_rules_between_settings_never_judge_an_invalid_value_by_its_default():
    # The validity is longer than the interval that was meant; the default interval (PT1M) must not be held against it.
    lines = problems(environ={**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_CHECK_INTERVAL": "10s",
                              "CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_VALIDITY_DURATION": "PT30S"})
    assert len(lines) == 1 and lines[0].startswith(f"{P}storage.check.interval='10s'"), lines


def test_a_malformed_unicode_escape_is_refused_with_its_key_and_line_and_everything_else_reported(tmp_path):
    path = write(tmp_path, (
        f"# java.util.Properties refuses these\n"
        f"{P}throttle.factor.fallback=0.\\u00\n"
        f"throttle.service.admin.token=0123456789abcdef\\u12G4\n"
        f"ke\\u00y=broker setting\n"
        f"{P}storage.per.volume.limit.min.available.bytes=100\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.1\n"
        f"{P}kafka.admin.bootstrap.servers=a:1\n"
    ))
    lines = problems(config_file=path, environ={})
    escape = "allowed: \\uXXXX escapes with four hexadecimal digits (java.util.Properties refuses this file too)"
    assert f"{P}throttle.factor.fallback='0.\\\\u00' (from {path}, line 2): {escape}" in lines
    assert f"throttle.service.admin.token='<hidden>' (from {path}, line 3): {escape}" in lines
    assert f"--config='{path}' (from {path}, line 4): allowed: a key with \\uXXXX escapes of four hexadecimal digits (java.util.Properties refuses this file too)" in lines
    assert sum("not both" in line for line in lines) == 2  # and the rest of the file is judged too
    assert len(lines) == 5 and "12G4" not in "\n".join(lines)


def test_properties_follow_java_on_line_ends_and_lone_backslashes():
    assert parse_properties("a=1\fb=2\x85c\u2028d\n") == {"a": "1\fb=2\x85c\u2028d"}
    assert parse_properties("a=1\\\n  # still the value\nb") == {"a": "1# still the value", "b": ""}
    assert parse_properties("\\\n#a comment\nk=v\n\\") == {"k": "v", "": ""}
@pytest.mark.parametrize("value", ["1023", "104857601", "1MiB", "-1"])
def test_the_request_body_limit_is_an_integer_between_1_kib_and_100_mib(value):
    lines = problems(environ={**MINIMAL, "THROTTLE_SERVICE_HTTP_MAX_BODY_BYTES": value})
    assert len(lines) == 1 and lines[0].startswith(f"throttle.service.http.max.body.bytes={value!r}"), lines
    assert "an integer from 1024 to 104857600" in lines[0]
    assert load_settings(environ=MINIMAL).http_max_body_bytes == 1048576


@pytest.mark.parametrize(
    ("key", "value"),
    [("THROTTLE_SERVICE_HTTP_HEAD_TIMEOUT", "PT0S"), ("THROTTLE_SERVICE_HTTP_HEAD_TIMEOUT", "PT\u0663S"), ("THROTTLE_SERVICE_HTTP_IDLE_TIMEOUT", "PT6M"),
     ("THROTTLE_SERVICE_HTTP_MAX_CONNECTIONS", "15"), ("THROTTLE_SERVICE_HTTP_MAX_CONNECTIONS", "lots")],
)
def test_the_edge_deadlines_and_connection_cap_are_checked_by_key(key, value):
    lines = problems(environ={**MINIMAL, key: value})
    prop = key.lower().replace("_", ".")
    assert len(lines) == 1 and lines[0].startswith(f"{prop}={value!r}"), lines


def test_the_edge_defaults_are_a_few_seconds_and_4096_connections():
    settings = load_settings(environ=MINIMAL)
    assert settings.http_head_timeout.total_seconds() == 5 and settings.http_idle_timeout.total_seconds() == 5
    assert settings.http_max_connections == 4096


MEGABYTE_VALUE = "9" * 1_000_000


def test_a_megabyte_value_is_quoted_by_its_first_200_characters_and_its_length():
    env = {**MINIMAL, "CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK": MEGABYTE_VALUE}
    (line,) = problems(environ=env)
    assert len(line.encode()) < 1024, len(line)
    assert line.startswith(f"{P}throttle.factor.fallback='{'9' * 200}'... (1,000,000 characters)"), line[:400]
    assert "allowed: a number in [0.0, 1.0]" in line


def test_a_quoted_prefix_stays_bounded_whatever_characters_it_holds():
    from app.redaction import SHOWN_VALUE_CHARS, quoted

    assert quoted("short") == "'short'"
    for value in ("\x00" * 10_000, "\U0001f600\x85" * 10_000, "'\"\\" * 10_000):
        shown = quoted(value)
        assert len(shown) < SHOWN_VALUE_CHARS + 40 and shown.endswith(f"... ({len(value):,} characters)"), shown


def test_the_command_exits_at_once_on_a_huge_value_with_its_output_unread(tmp_path):
    """A message larger than a pipe holds would block the service in its write to a reader that
    reads only once it has exited; a bounded message cannot."""
    config = write(tmp_path, f"{P}throttle.factor.fallback={MEGABYTE_VALUE}\n")  # an environment variable holds at most 128 KiB
    env = {"PATH": "/usr/bin", **MINIMAL}
    for args in (["--check-config"], []):
        command = [sys.executable, "-m", "app", "--config", str(config), *args]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            assert process.wait(20) == 2
        finally:
            process.kill()
            stdout, stderr = process.communicate(timeout=10)
        assert len(stderr) < 2048 and stdout == b"", stderr[-2000:]


def test_a_misspelt_environment_variable_is_refused_with_the_name_it_meant():
    typo = "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_SOFT_LIMIT_MIN_AVIALABLE_RATIO"
    env = {
        "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS": "localhost:9092",
        "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_RATIO": "0.1",
        typo: "0.2",
    }
    (line,) = problems(environ=env)
    assert line.startswith(f"{typo}='0.2' (from environment variable {typo})"), line
    assert line.endswith("did you mean CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_SOFT_LIMIT_MIN_AVAILABLE_RATIO?"), line
    (line,) = problems(environ={**MINIMAL, "THROTTLE_SERVICE_HTTP_PROT": "8081"})
    assert "THROTTLE_SERVICE_HTTP_PROT='8081'" in line and line.endswith("did you mean THROTTLE_SERVICE_HTTP_PORT?"), line
    (line,) = problems(environ={**MINIMAL, "THROTTLE_SERVICE_NO_SUCH_THING": "1"})
    assert line.endswith("allowed: a known setting (see docs/configuration.md)"), line


def test_a_misspelt_secret_variable_does_not_show_its_value():
    (line,) = problems(environ={**MINIMAL, "THROTTLE_SERVICE_ADMIN_TOKN": "a-secret-of-some-length"})
    assert "a-secret" not in line and "<hidden>" in line and line.endswith("did you mean THROTTLE_SERVICE_ADMIN_TOKEN?"), line


def test_variables_of_other_programs_client_properties_and_kubernetes_service_links_are_accepted():
    env = {
        **MINIMAL,
        "KAFKA_HEAP_OPTS": "-Xmx1g",
        "KAFKA_CLIENT_QUOTA_CALLBACK_SERVICE_URL": "http://throttle-service:8080",
        "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SECURITY_PROTOCOL": "PLAINTEXT",
        "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_CLIENT_ID": "throttle",
        "THROTTLE_SERVICE_HISTORY_KAFKA_PRODUCER_LINGER_MS": "5",
        # Kubernetes' variables for a Service named throttle-service in the pod's namespace
        "THROTTLE_SERVICE_SERVICE_HOST": "10.0.0.11",
        "THROTTLE_SERVICE_SERVICE_PORT": "8080",
        "THROTTLE_SERVICE_SERVICE_PORT_HTTP": "8080",
        "THROTTLE_SERVICE_PORT": "tcp://10.0.0.11:8080",
        "THROTTLE_SERVICE_PORT_8080_TCP": "tcp://10.0.0.11:8080",
        "THROTTLE_SERVICE_PORT_8080_TCP_PROTO": "tcp",
        "THROTTLE_SERVICE_PORT_8080_TCP_PORT": "8080",
        "THROTTLE_SERVICE_PORT_8080_TCP_ADDR": "10.0.0.11",
        "THROTTLE_SERVICE_HEADLESS_SERVICE_HOST": "10.0.0.12",
    }
    settings = load_settings(environ=env)
    assert settings.kafka_admin == {"security.protocol": "PLAINTEXT", "client.id": "throttle"}
    assert settings.history_kafka_producer == {"linger.ms": "5"}
    (line,) = problems(environ={**MINIMAL, "THROTTLE_SERVICE_HTTP_PORT_": "8081"})
    assert "THROTTLE_SERVICE_HTTP_PORT_" in line, line
