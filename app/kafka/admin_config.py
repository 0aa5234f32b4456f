"""Translate Kafka admin client properties (Java names) into kafka-python settings.

Proposal 047 passes ``client.quota.callback.static.kafka.admin.*`` to the admin client. The
service's admin client is kafka-python, whose settings have other names and which reads TLS
material as PEM files only, so each supported Java property is mapped here, TLS stores
become a ``TlsFiles`` (PEM or PKCS12, see ``app.kafka.tls``), and anything else is refused
with a message naming it. Secret values (passwords, the JAAS line) are never echoed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.redaction import bounded, quoted, shown_value
from app.kafka.tls import STORE_TYPES, TlsFiles, TlsMaterialError

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
_OTHER = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.kerberos.service.name",
    "ssl.truststore.type",
    "ssl.keystore.type",
    "ssl.endpoint.identification.algorithm",
    "client.id",
)
SUPPORTED_PROPERTIES = tuple(sorted([*_TLS_FIELDS, *_OTHER]))


class AdminConfigProblem(ValueError):
    def __init__(self, key: str, value: str | None, allowed: str) -> None:
        shown = shown_value(key, value)
        super().__init__(f"{key}={'<missing>' if shown is None else quoted(shown)}: allowed: {allowed}")
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
            key, value, "PEM or PKCS12 (convert a JKS store: keytool -importkeystore -srcstoretype JKS -deststoretype PKCS12)"
        )
    if upper not in STORE_TYPES:
        raise AdminConfigProblem(key, value, "PEM or PKCS12")
    return upper


def to_kafka_python(properties: Mapping[str, str], load_tls: bool = False) -> tuple[AdminClientConfig, list[AdminConfigProblem]]:
    """Map Java admin properties to kafka-python keyword arguments and TLS files.

    Returns the configuration and every problem found (all of them, not just the first).
    ``load_tls`` also reads the stores once, so a wrong path or password is reported now."""
    config: dict[str, Any] = {}
    tls: dict[str, Any] = {}
    problems: list[AdminConfigProblem] = []
    for key, value in sorted(properties.items()):
        try:
            if key in _TLS_FIELDS:
                name = _TLS_FIELDS[key]
                if name in tls:
                    raise AdminConfigProblem(key, value, f"only one of {', '.join(k for k, v in _TLS_FIELDS.items() if v == name)}")
                tls[name] = value
            elif key == "client.id":
                config["client_id"] = value
            elif key == "sasl.kerberos.service.name":
                config["sasl_kerberos_service_name"] = value
            elif key == "security.protocol":
                if value.upper() not in SECURITY_PROTOCOLS:
                    raise AdminConfigProblem(key, value, "one of " + ", ".join(SECURITY_PROTOCOLS))
                config["security_protocol"] = value.upper()
            elif key == "sasl.mechanism":
                if value.upper() not in SASL_MECHANISMS:
                    raise AdminConfigProblem(key, value, "one of " + ", ".join(SASL_MECHANISMS))
                config["sasl_mechanism"] = value.upper()
            elif key == "sasl.jaas.config":
                config.update(_jaas_credentials(value))
            elif key == "ssl.truststore.type":
                tls["truststore_type"] = _store_type(key, value)
            elif key == "ssl.keystore.type":
                tls["keystore_type"] = _store_type(key, value)
            elif key == "ssl.endpoint.identification.algorithm":
                if value.lower() not in ("", "https"):
                    raise AdminConfigProblem(key, value, "https or empty (no host name check)")
                tls["check_hostname"] = value.lower() == "https"
            elif key in ("bootstrap.servers", "request.timeout.ms"):
                hint = {
                    "bootstrap.servers": "set client.quota.callback.static.kafka.admin.bootstrap.servers",
                    "request.timeout.ms": "set throttle.service.kafka.request.timeout instead",
                }[key]
                raise AdminConfigProblem(key, value, hint)
            else:
                raise AdminConfigProblem(key, value, "one of " + ", ".join(SUPPORTED_PROPERTIES))
        except AdminConfigProblem as problem:
            problems.append(problem)

    protocol = config.get("security_protocol", "PLAINTEXT")
    if protocol in SASL_PROTOCOLS and "sasl_mechanism" not in config:
        # kafka-python has no default mechanism (it would ask the broker for "None"); the
        # username and password of sasl.jaas.config serve PLAIN unless another is named.
        config["sasl_mechanism"] = "PLAIN"
    files = TlsFiles(**tls)
    if tls.get("keyfile") and files.keystore_type != "PEM":
        problems.append(AdminConfigProblem("ssl.keyfile", tls["keyfile"], "only with a PEM key store (a PKCS12 store holds its key)"))
    if protocol not in TLS_PROTOCOLS:
        reported = {problem.key for problem in problems}
        stray = sorted(k for k in properties if k.startswith("ssl.") and k != "ssl.endpoint.identification.algorithm" and k not in reported)
        for key in stray:
            problems.append(
                AdminConfigProblem(key, properties[key], f"only with security.protocol SSL or SASL_SSL (it is {bounded(protocol)}: the connection would not use TLS)")
            )
        return AdminClientConfig(config, None), problems
    if load_tls and not any(p.key.startswith("ssl.") or p.key == "security.protocol" for p in problems):
        try:
            files.context()
        except TlsMaterialError as exc:
            # Name the property the operator set (ssl.cafile is an alias of the trust store).
            field_name = _TLS_FIELDS.get(exc.key)
            key = next((k for k in sorted(properties) if field_name and _TLS_FIELDS.get(k) == field_name), exc.key)
            problems.append(AdminConfigProblem(key, properties.get(key), f"a store the service can read and decrypt ({bounded(exc.reason)})"))
    return AdminClientConfig(config, files), problems


def to_librdkafka(properties: Mapping[str, str], bootstrap_servers: str) -> dict[str, str]:
    """The same connection (bootstrap servers, TLS, SASL) as librdkafka settings, for the
    confluent-kafka clients of the service (the Kafka-backed quota store). TLS material is
    passed in memory (PEM), whatever the stores' format. Call with validated properties."""
    config, problems = to_kafka_python(properties)
    if problems:
        raise problems[0]
    settings = config.settings
    out = {"bootstrap.servers": bootstrap_servers, "security.protocol": settings.get("security_protocol", "PLAINTEXT")}
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
        out["ssl.endpoint.identification.algorithm"] = "https" if config.tls.check_hostname else "none"
    return out
