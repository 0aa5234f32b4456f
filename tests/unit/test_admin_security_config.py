"""Admin client security settings: Kafka's ssl.* / sasl.* names mapped onto kafka-python and
an SSL context, PEM and PKCS12 stores, and secrets kept out of messages and logs."""

from __future__ import annotations

import logging
import os

import pytest

from app.redaction import install_log_redaction, is_secret_key, redact
from app.settings import ConfigurationError, load_settings
from app.kafka.admin_config import to_kafka_python
from app.kafka.tls import TlsFiles
from tests.integration.pki import STORE_PASSWORD, Pki

ADMIN = "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_"
MINIMAL = {
    ADMIN + "BOOTSTRAP_SERVERS": "localhost:9092",
    "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_BYTES": "1000",
}
KEY_PASSWORD = "unit-key-pass-41x"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def client(pki: Pki):
    return pki.leaf("client", key_password=KEY_PASSWORD)


def problems(environ: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ={**MINIMAL, **environ})
    return [str(p) for p in caught.value.problems]


def test_pem_files_map_to_a_tls_context_with_the_key_password(pki, client):
    config, found = to_kafka_python(
        {"security.protocol": "SSL", "ssl.truststore.location": str(pki.ca_cert), "ssl.keystore.location": str(client.bundle),
         "ssl.key.password": KEY_PASSWORD},
        load_tls=True,
    )
    assert found == []
    assert config.settings == {"security_protocol": "SSL"}
    assert config.tls == TlsFiles(truststore=str(pki.ca_cert), keystore=str(client.bundle), key_password=KEY_PASSWORD)
    context = config.tls.context()
    assert context.check_hostname and len(context.get_ca_certs()) == 1
    assert KEY_PASSWORD not in repr(config)


def test_pkcs12_stores_load_and_a_separate_pem_key_file_works(pki, client):
    truststore = pki.truststore("trust")
    p12 = TlsFiles(truststore=str(truststore), truststore_type="PKCS12", truststore_password=STORE_PASSWORD,
                   keystore=str(client.pkcs12), keystore_type="PKCS12", keystore_password=KEY_PASSWORD)
    assert p12.context().get_ca_certs()[0]["subject"] == ((("commonName", "ca"),),)
    separate = TlsFiles(truststore=str(pki.ca_cert), keystore=str(client.cert), keyfile=str(client.key), key_password=KEY_PASSWORD)
    separate.context()


@pytest.mark.parametrize(
    ("environ", "key", "allowed"),
    [
        ({"SSL_TRUSTSTORE_TYPE": "JKS"}, "ssl.truststore.type", "keytool -importkeystore"),
        ({"SSL_KEY_PASSWORD": "not-the-password"}, "ssl.key.password", "read and decrypt"),
        ({"SSL_TRUSTSTORE_LOCATION": "/no/such/ca.pem"}, "ssl.truststore.location", "read and decrypt"),
        ({"SSL_KEYSTORE_TYPE": "PKCS12", "SSL_KEYSTORE_PASSWORD": "wrong-store-pass"}, "ssl.keystore.location", "read and decrypt"),
    ],
)
def test_a_store_that_cannot_be_used_is_named_and_its_password_not_shown(pki, client, environ, key, allowed):
    keystore = client.pkcs12 if environ.get("SSL_KEYSTORE_TYPE") == "PKCS12" else client.bundle
    base = {"SECURITY_PROTOCOL": "SSL", "SSL_TRUSTSTORE_LOCATION": str(pki.ca_cert), "SSL_KEYSTORE_LOCATION": str(keystore), "SSL_KEY_PASSWORD": KEY_PASSWORD}
    lines = problems({ADMIN + k: v for k, v in {**base, **environ}.items()})
    assert len(lines) == 1 and lines[0].startswith(f"client.quota.callback.static.kafka.admin.{key}="), lines
    assert allowed in lines[0]
    for secret in (KEY_PASSWORD, "not-the-password", "wrong-store-pass"):
        assert secret not in lines[0]


def test_tls_settings_without_a_tls_protocol_are_refused_rather_than_ignored(pki):
    lines = problems({ADMIN + "SSL_TRUSTSTORE_LOCATION": str(pki.ca_cert)})
    assert lines == [
        f"client.quota.callback.static.kafka.admin.ssl.truststore.location='{pki.ca_cert}' (from environment variable "
        f"{ADMIN}SSL_TRUSTSTORE_LOCATION): allowed: only with security.protocol SSL or SASL_SSL (it is PLAINTEXT: the connection would not use TLS)"
    ]


def test_scram_credentials_come_from_the_jaas_line_and_stay_hidden():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="svc" password="jaas-secret-9";'
    config, found = to_kafka_python({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas})
    assert found == [] and config.tls is None
    assert config.settings == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                               "sasl_plain_username": "svc", "sasl_plain_password": "jaas-secret-9"}
    assert "jaas-secret-9" not in repr(config)
    lines = problems({ADMIN + "SECURITY_PROTOCOL": "SASL_SSL", ADMIN + "SASL_JAAS_CONFIG": 'x required user="svc" password="jaas-secret-9";'})
    assert len(lines) == 1 and "sasl.jaas.config='<hidden>'" in lines[0]


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_without_a_named_mechanism_is_plain_over_either_protocol(protocol):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="svc" password="plain-secret-9";'
    config, found = to_kafka_python({"security.protocol": protocol, "sasl.jaas.config": jaas})
    assert found == []
    assert config.settings["sasl_mechanism"] == "PLAIN"


def test_settings_with_secret_keys_are_secrets_in_dict_valued_settings_too():
    for key in ("sasl.password", "ssl.key.password", "ssl.keystore.password", "sasl.jaas.config", "throttle.service.admin.token", "sasl.oauthbearer.client.secret"):
        assert is_secret_key(key)
    assert not is_secret_key("ssl.keystore.location")
    environ = {
        **MINIMAL,
        "THROTTLE_SERVICE_ADMIN_TOKEN": "token-0123456789abcdef",
        "THROTTLE_SERVICE_HISTORY_KAFKA_PRODUCER_SASL_PASSWORD": "producer-secret-1",
        ADMIN + "SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        ADMIN + "SASL_JAAS_CONFIG": 'm required username="u" password="admin-secret-2";',
    }
    settings = load_settings(environ=environ)
    assert {"token-0123456789abcdef", "producer-secret-1", "admin-secret-2"} <= settings.secret_values
    shown = repr(settings) + str(settings)
    for secret in ("token-0123456789abcdef", "producer-secret-1", "admin-secret-2"):
        assert secret not in shown


def test_misspelt_or_unsupported_secret_keys_do_not_echo_their_values(tmp_path):
    path = tmp_path / "t.properties"
    path.write_text("throttle.service.admin.tokn=typo-token-secret-77\nclient.quota.callback.static.kafka.admin.sasl.password=plain-secret-88\n")
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path, environ=MINIMAL)
    text = "\n".join(str(p) for p in caught.value.problems)
    assert "throttle.service.admin.tokn" in text and "kafka.admin.sasl.password" in text
    assert "typo-token-secret-77" not in text and "plain-secret-88" not in text


class Kept(logging.Handler):
    """Keeps the records one logger emits, as a handler would see them."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.logger = logging.getLogger(name)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> list[logging.LogRecord]:
        self.logger.addHandler(self)
        self.level, self.logger.level = self.logger.level, logging.DEBUG
        return self.records

    def __exit__(self, *exc_info) -> None:
        self.logger.removeHandler(self)
        self.logger.level = self.level


def test_log_records_of_library_loggers_are_scrubbed_of_configured_secrets():
    secret = "scrub-me-" + os.urandom(4).hex()
    short = os.urandom(3).hex() + "z"  # 7 characters: too short to scrub, it would garble ordinary words
    install_log_redaction({secret, short})
    with Kept("kafka.some.library") as records:
        logger = logging.getLogger("kafka.some.library")
        logger.debug("Starting with configuration: %s", {"sasl_plain_password": secret, "other": short})
        try:
            raise RuntimeError(f"failed with {secret}")
        except RuntimeError:
            logger.exception("boom")
    assert secret not in records[0].getMessage() and "<hidden>" in records[0].getMessage() and short in records[0].getMessage()
    assert secret not in (records[1].exc_text or "") and "failed with <hidden>" in records[1].exc_text
    assert redact(f"x{secret}y", {secret}) == "x<hidden>y"


def test_the_services_own_log_lines_are_never_rewritten_by_value():
    """What the service writes itself hides secrets by key, so a secret that happens to be
    words of its messages leaves them whole; exception text is still scrubbed."""
    words = "material unusable " + os.urandom(4).hex()
    install_log_redaction({words})
    with Kept("app.kafka.volume_source") as records:
        logger = logging.getLogger("app.kafka.volume_source")
        logger.warning("admin client TLS %s: ssl.keystore.location", words)
        try:
            raise RuntimeError(f"library said {words}")
        except RuntimeError:
            logger.exception("round failed")
    assert records[0].getMessage() == f"admin client TLS {words}: ssl.keystore.location"
    assert "library said <hidden>" in records[1].exc_text


def test_the_fingerprint_changes_with_the_content_even_when_the_mtime_does_not(tmp_path):
    path = tmp_path / "client.pem"
    path.write_text("first")
    stat = path.stat()
    files = TlsFiles(keystore=str(path))
    before = files.fingerprint()
    path.write_text("other")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert files.fingerprint() != before
    path.unlink()
    assert files.fingerprint() == ((str(path), "missing"),)


def test_the_volume_source_logs_each_change_of_its_tls_files_once_and_reloads_them(pki, client, tmp_path, caplog):
    """Without a cluster (nothing listens on port 1) every round fails, but the files are
    digested each round: a change is logged once, with the path and without the password."""
    from app.kafka.volume_source import KafkaVolumeSource

    live = tmp_path / "client.pem"
    live.write_bytes(client.bundle.read_bytes())
    files = TlsFiles(truststore=str(pki.ca_cert), keystore=str(live), key_password=KEY_PASSWORD)
    source = KafkaVolumeSource("127.0.0.1:1", 0.3, {"security_protocol": "SSL"}, tls=files)
    caplog.set_level(logging.INFO, logger="app.kafka.volume_source")
    try:
        assert source.observe().failed
        assert source.observe().failed
        assert "TLS files changed" not in caplog.text
        live.write_bytes(b"not a certificate")
        broken = source.observe()
        assert broken.failed and broken.error.startswith("admin client TLS material unusable: ssl.keystore.location")
        source.observe()
        assert caplog.text.count("admin client TLS files changed") == 1 and str(live) in caplog.text
        live.write_bytes(client.bundle.read_bytes())
        restored = source.observe()
        assert "TLS material unusable" not in (restored.error or "")
        assert caplog.text.count("admin client TLS files changed") == 2
        assert KEY_PASSWORD not in caplog.text
    finally:
        source.close()


def test_a_broken_log_call_is_left_to_logging_to_report_not_raised_by_the_scrubber():
    install_log_redaction({"scrub-me-too-1234"})
    record = logging.getLogRecordFactory()("app.test", logging.WARNING, __file__, 1, "two placeholders %s %s", ("one",), None)
    assert record.msg == "two placeholders %s %s"  # the handler's formatting reports it, as without the scrubber


def test_the_admin_connection_logs_its_settings_with_secrets_hidden_by_key(caplog):
    """The service's own lines are not scrubbed by value, so this one hides the SASL password
    by its key, whatever its length."""
    from app.kafka.admin_connection import AdminConnection

    password = "pw-" + os.urandom(3).hex()
    connection = AdminConnection("127.0.0.1:1", 300, {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                                                      "sasl_plain_username": "svc", "sasl_plain_password": password})
    caplog.set_level(logging.DEBUG, logger="app.kafka.admin_connection")
    try:
        connection._build().close()
    finally:
        connection.close()
    line = next(r.getMessage() for r in caplog.records if "building the admin connection" in r.getMessage())
    assert password not in line and "'sasl_plain_password': '<hidden>'" in line and "'sasl_plain_username': 'svc'" in line
