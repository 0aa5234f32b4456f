"""Translate Kafka admin client properties (Java names) into kafka-python settings.

Proposal 047 passes ``client.quota.callback.static.kafka.admin.*`` to the admin client. The
service's admin client is kafka-python, whose settings have other names and which reads TLS
material as PEM files, so each supported Java property is mapped here and anything else is
refused with a message naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')

# Java property -> (kafka-python setting, description of allowed values)
_DIRECT: dict[str, tuple[str, str]] = {
    "client.id": ("client_id", "any client id"),
    "ssl.truststore.location": ("ssl_cafile", "a PEM file of trusted certificates (ssl.truststore.type=PEM)"),
    "ssl.keystore.location": ("ssl_certfile", "a PEM file with the client certificate and key (ssl.keystore.type=PEM)"),
    "ssl.key.password": ("ssl_password", "the password of the PEM private key"),
    "ssl.cafile": ("ssl_cafile", "a PEM file of trusted certificates"),
    "ssl.certfile": ("ssl_certfile", "a PEM client certificate"),
    "ssl.keyfile": ("ssl_keyfile", "a PEM private key"),
    "ssl.crlfile": ("ssl_crlfile", "a PEM certificate revocation list"),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", "the Kerberos service name"),
}

SUPPORTED_PROPERTIES = tuple(
    sorted(
        list(_DIRECT)
        + [
            "security.protocol",
            "sasl.mechanism",
            "sasl.jaas.config",
            "ssl.truststore.type",
            "ssl.keystore.type",
            "ssl.endpoint.identification.algorithm",
        ]
    )
)


class AdminConfigProblem(ValueError):
    def __init__(self, key: str, value: str, allowed: str) -> None:
        super().__init__(f"{key}={value!r}: allowed: {allowed}")
        self.key = key
        self.value = value
        self.allowed = allowed


def _jaas_credentials(value: str) -> dict[str, str]:
    options = {name: raw.replace('\\"', '"') for name, raw in _JAAS_OPTION.findall(value)}
    if "username" not in options or "password" not in options:
        raise AdminConfigProblem(
            "sasl.jaas.config",
            "<hidden>",
            'a login module with username="..." password="..." (PLAIN or SCRAM)',
        )
    return {"sasl_plain_username": options["username"], "sasl_plain_password": options["password"]}


def to_kafka_python(properties: Mapping[str, str]) -> tuple[dict[str, Any], list[AdminConfigProblem]]:
    """Map Java admin properties to kafka-python keyword arguments.

    Returns the arguments and every problem found (all of them, not just the first)."""
    config: dict[str, Any] = {}
    problems: list[AdminConfigProblem] = []
    for key, value in sorted(properties.items()):
        try:
            if key in _DIRECT:
                config[_DIRECT[key][0]] = value
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
            elif key in ("ssl.truststore.type", "ssl.keystore.type"):
                if value.upper() != "PEM":
                    raise AdminConfigProblem(key, value, "PEM (the admin client reads PEM files, not JKS or PKCS12)")
            elif key == "ssl.endpoint.identification.algorithm":
                if value.lower() not in ("", "https"):
                    raise AdminConfigProblem(key, value, "https or empty (no host name check)")
                config["ssl_check_hostname"] = value.lower() == "https"
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
    return config, problems
