"""Translate Kafka admin client properties (Java names) into kafka-python settings.

Proposal 047 passes ``client.quota.callback.static.kafka.admin.*`` to the admin client. The
service's admin client is kafka-python, whose settings have other names and which reads TLS
material as PEM files only, so each supported Java property is mapped here, TLS stores
become a ``TlsFiles`` (PEM or PKCS12, see ``app.kafka.tls``), and anything else is refused
with a message naming it. Secret values (passwords, the JAAS line) are never echoed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.kafka.tls import STORE_TYPES, TlsFiles, TlsMaterialError
from app.redaction import bounded, quoted, shown_value

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')

# Java property -> TlsFiles field; the kafka-python names (ssl.cafile, ...) are kept as aliases.
_TLS_FIELDS: dict[str, str] = {
    "ssl.truststore.location": "truststore",
    "ssl.truststore.password": "truststore_password",
    "ssl.keystore.location": "keystore",
    "ssl.keystore.password": "keystore_password",
    "ssl.key.password": "key_password",
    "ssl.cafile": "truststore",
    "ssl.certfile": "keystore",
    "ssl.keyfile": "keyfile",
    "ssl.crlfile": "crlfile",
}
# Admin client properties set by a setting of their own.
_SET_ELSEWHERE = {
    "bootstrap.servers": "set client.quota.callback.static.kafka.admin.bootstrap.servers",
    "request.timeout.ms": "set throttle.service.kafka.request.timeout instead",
}


class AdminConfigProblem(ValueError):
    def __init__(self, key: str, value: str | None, allowed: str) -> None:
        shown = shown_value(key, value)
        super().__init__(
            f"{key}={'<missing>' if shown is None else quoted(shown)}: allowed: {allowed}"
        )
        self.key = key
        self.value = shown
        self.allowed = allowed


@dataclass(frozen=True)
class AdminClientConfig:
    """kafka-python keyword arguments, and the TLS material to build its SSL context from."""

    settings: dict[str, Any] = field(default_factory=dict, repr=False)  # holds the SASL password
    tls: TlsFiles | None = None


def _jaas_credentials(value: str) -> dict[str, str]:
    options = {name: raw.replace('\\"', '"') for name, raw in _JAAS_OPTION.findall(value)}
    if "username" not in options or "password" not in options:
        raise AdminConfigProblem(
            "sasl.jaas.config",
            value,
            'a login module with username="..." password="..." (PLAIN or SCRAM)',
        )
    return {"sasl_plain_username": options["username"], "sasl_plain_password": options["password"]}


def _store_type(key: str, value: str) -> str:
    upper = value.upper()
    if upper == "JKS":
        raise AdminConfigProblem(
            key,
            value,
            "PEM or PKCS12 (convert a JKS store: keytool -importkeystore -srcstoretype JKS -deststoretype PKCS12)",
        )
    if upper not in STORE_TYPES:
        raise AdminConfigProblem(key, value, "PEM or PKCS12")
    return upper


# What one property gives: kafka-python keyword arguments and TlsFiles fields.
_Mapped = tuple[dict[str, Any], dict[str, Any]]
_Mapping = Callable[[str, str], _Mapped]


def _as_is(setting: str) -> _Mapping:
    return lambda key, value: ({setting: value}, {})


def _choice(setting: str, choices: tuple[str, ...]) -> _Mapping:
    """One of ``choices``, in any case; passed on in upper case."""

    def mapped(key: str, value: str) -> _Mapped:
        if value.upper() not in choices:
            raise AdminConfigProblem(key, value, "one of " + ", ".join(choices))
        return {setting: value.upper()}, {}

    return mapped


def _tls_file(name: str) -> _Mapping:
    return lambda key, value: ({}, {name: value})


def _tls_store_type(name: str) -> _Mapping:
    return lambda key, value: ({}, {name: _store_type(key, value)})


def _jaas(key: str, value: str) -> _Mapped:
    return _jaas_credentials(value), {}


def _hostname_check(key: str, value: str) -> _Mapped:
    if value.lower() not in ("", "https"):
        raise AdminConfigProblem(key, value, "https or empty (no host name check)")
    return {}, {"check_hostname": value.lower() == "https"}


# Each supported Java property and what it becomes.
_PROPERTIES: dict[str, _Mapping] = {
    **{key: _tls_file(name) for key, name in _TLS_FIELDS.items()},
    "security.protocol": _choice("security_protocol", SECURITY_PROTOCOLS),
    "sasl.mechanism": _choice("sasl_mechanism", SASL_MECHANISMS),
    "sasl.jaas.config": _jaas,
    "sasl.kerberos.service.name": _as_is("sasl_kerberos_service_name"),
    "ssl.truststore.type": _tls_store_type("truststore_type"),
    "ssl.keystore.type": _tls_store_type("keystore_type"),
    "ssl.endpoint.identification.algorithm": _hostname_check,
    "client.id": _as_is("client_id"),
}
SUPPORTED_PROPERTIES = tuple(sorted(_PROPERTIES))


def _mapped(key: str, value: str, tls: Mapping[str, Any]) -> _Mapped:
    """What ``key`` gives, or AdminConfigProblem; ``tls``: the TlsFiles fields given so far."""
    if key in _SET_ELSEWHERE:
        raise AdminConfigProblem(key, value, _SET_ELSEWHERE[key])
    mapping = _PROPERTIES.get(key)
    if mapping is None:
        raise AdminConfigProblem(key, value, "one of " + ", ".join(SUPPORTED_PROPERTIES))
    settings, tls_fields = mapping(key, value)
    twice = next(iter(tls_fields.keys() & tls.keys()), None)  # two aliases of one store
    if twice is not None:
        raise AdminConfigProblem(
            key, value, f"only one of {', '.join(k for k, v in _TLS_FIELDS.items() if v == twice)}"
        )
    return settings, tls_fields


def to_kafka_python(
    properties: Mapping[str, str], load_tls: bool = False
) -> tuple[AdminClientConfig, list[AdminConfigProblem]]:
    """Map Java admin properties to kafka-python keyword arguments and TLS files.

    Returns the configuration and every problem found (all of them, not just the first).
    ``load_tls`` also reads the stores once, so a wrong path or password is reported now."""
    config: dict[str, Any] = {}
    tls: dict[str, Any] = {}
    problems: list[AdminConfigProblem] = []
    for key, value in sorted(properties.items()):
        try:
            settings, tls_fields = _mapped(key, value, tls)
        except AdminConfigProblem as problem:
            problems.append(problem)
            continue
        config.update(settings)
        tls.update(tls_fields)

    protocol = config.get("security_protocol", "PLAINTEXT")
    if protocol in SASL_PROTOCOLS and "sasl_mechanism" not in config:
        # kafka-python has no default mechanism (it would ask the broker for "None"); the
        # username and password of sasl.jaas.config serve PLAIN unless another is named.
        config["sasl_mechanism"] = "PLAIN"
    files = TlsFiles(**tls)
    if tls.get("keyfile") and files.keystore_type != "PEM":
        problems.append(
            AdminConfigProblem(
                "ssl.keyfile",
                tls["keyfile"],
                "only with a PEM key store (a PKCS12 store holds its key)",
            )
        )
    if protocol not in TLS_PROTOCOLS:
        problems.extend(
            _tls_without_tls(properties, protocol, {problem.key for problem in problems})
        )
        return AdminClientConfig(config, None), problems
    if load_tls and not any(
        p.key.startswith("ssl.") or p.key == "security.protocol" for p in problems
    ):
        problems.extend(_unreadable_stores(properties, files))
    return AdminClientConfig(config, files), problems


def _tls_without_tls(
    properties: Mapping[str, str], protocol: str, reported: set[str]
) -> list[AdminConfigProblem]:
    """The TLS properties given for a connection without TLS (but those reported already)."""
    stray = sorted(
        k
        for k in properties
        if k.startswith("ssl.")
        and k != "ssl.endpoint.identification.algorithm"
        and k not in reported
    )
    allowed = f"only with security.protocol SSL or SASL_SSL (it is {bounded(protocol)}: the connection would not use TLS)"
    return [AdminConfigProblem(key, properties[key], allowed) for key in stray]


def _unreadable_stores(properties: Mapping[str, str], files: TlsFiles) -> list[AdminConfigProblem]:
    """Reads the stores once (I/O): the store that cannot be read or decrypted, if any."""
    try:
        files.context()
    except TlsMaterialError as exc:
        # Name the property the operator set (ssl.cafile is an alias of the trust store).
        field_name = _TLS_FIELDS.get(exc.key)
        key = next(
            (k for k in sorted(properties) if field_name and _TLS_FIELDS.get(k) == field_name),
            exc.key,
        )
        return [
            AdminConfigProblem(
                key,
                properties.get(key),
                f"a store the service can read and decrypt ({bounded(exc.reason)})",
            )
        ]
    return []


def to_librdkafka(properties: Mapping[str, str], bootstrap_servers: str) -> dict[str, str]:
    """The same connection (bootstrap servers, TLS, SASL) as librdkafka settings, for the
    confluent-kafka clients of the service (the Kafka-backed quota store). TLS material is
    passed in memory (PEM), whatever the stores' format. Call with validated properties."""
    config, problems = to_kafka_python(properties)
    if problems:
        raise problems[0]
    settings = config.settings
    out = {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": settings.get("security_protocol", "PLAINTEXT"),
    }
    if "client_id" in settings:
        out["client.id"] = settings["client_id"]
    if "sasl_mechanism" in settings:
        out["sasl.mechanism"] = settings["sasl_mechanism"]
    if "sasl_plain_username" in settings:
        out["sasl.username"] = settings["sasl_plain_username"]
        out["sasl.password"] = settings["sasl_plain_password"]
    if "sasl_kerberos_service_name" in settings:
        out["sasl.kerberos.service.name"] = settings["sasl_kerberos_service_name"]
    if config.tls is not None:
        ca, chain, key = config.tls.pem_material()
        if ca:
            out["ssl.ca.pem"] = ca
        if chain and key:
            out["ssl.certificate.pem"] = chain
            out["ssl.key.pem"] = key
        if config.tls.crlfile:
            out["ssl.crl.location"] = config.tls.crlfile
        out["ssl.endpoint.identification.algorithm"] = (
            "https" if config.tls.check_hostname else "none"
        )
    return out
