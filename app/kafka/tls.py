"""The admin client's TLS material: trust store, key store, and noticing when they change.

Kafka names its TLS files ``ssl.truststore.*`` / ``ssl.keystore.*`` in PEM, PKCS12 or JKS;
kafka-python only reads PEM files. The service builds the ``ssl.SSLContext`` itself from
PEM or PKCS12 files (JKS has no well-kept Python reader: convert it with keytool) and hands
it to kafka-python. Certificates are rotated on disk by operators and by cert-manager-like
tools, so the files' contents are fingerprinted each round; a change makes the volume
source build a new client with the new material (Strimzi kafka-quotas-plugin#63 never did).
"""

from __future__ import annotations

import hashlib
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

STORE_TYPES = ("PEM", "PKCS12")


class TlsMaterialError(ValueError):
    """A store that cannot be read or decrypted. ``key`` is the Java property to blame."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


@dataclass(frozen=True)
class TlsFiles:
    """Where the TLS material lives, in Kafka's terms (passwords kept out of repr)."""

    truststore: str | None = None
    truststore_type: str = "PEM"
    truststore_password: str | None = field(default=None, repr=False)
    keystore: str | None = None  # PEM: certificate chain and (maybe encrypted) key in one file
    keystore_type: str = "PEM"
    keystore_password: str | None = field(default=None, repr=False)
    keyfile: str | None = None  # a separate PEM key (kafka-python's ssl.keyfile)
    key_password: str | None = field(default=None, repr=False)
    crlfile: str | None = None
    check_hostname: bool = True

    def paths(self) -> tuple[str, ...]:
        return tuple(p for p in (self.truststore, self.keystore, self.keyfile, self.crlfile) if p)

    def fingerprint(self) -> tuple[tuple[str, str], ...]:
        """A digest of every file's content ("missing" for one that cannot be read): a
        rewritten file with an unchanged mtime still counts as changed."""
        digests = []
        for path in self.paths():
            try:
                digests.append((path, hashlib.sha256(Path(path).read_bytes()).hexdigest()))
            except OSError:
                digests.append((path, "missing"))
        return tuple(digests)

    def context(self) -> ssl.SSLContext:
        """A client context as kafka-python would build one (TLS 1.2+, verified peer)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.check_hostname
        if self.truststore:
            self._load_trust(context)
        else:
            context.load_default_certs()
        if self.keystore:
            self._load_key(context)
        if self.crlfile:
            try:
                context.load_verify_locations(self.crlfile)
            except (OSError, ssl.SSLError) as exc:
                raise TlsMaterialError("ssl.crlfile", _reason(exc)) from None
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
        return context

    def pem_material(self) -> tuple[str | None, str | None, str | None]:
        """(trusted CAs, certificate chain, unencrypted private key) as PEM text, for clients
        that take TLS material in memory (librdkafka's ssl.*.pem)."""
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            load_pem_private_key,
        )

        ca = None
        if self.truststore:
            try:
                if self.truststore_type == "PKCS12":
                    bundle = _read_pkcs12(self.truststore, self.truststore_password)
                    certificates = [c.certificate for c in bundle.additional_certs] + (
                        [bundle.cert.certificate] if bundle.cert else []
                    )
                    ca = "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)
                else:
                    ca = Path(self.truststore).read_text()
            except (OSError, ValueError) as exc:
                raise TlsMaterialError("ssl.truststore.location", _reason(exc)) from None
        if not self.keystore:
            return ca, None, None
        try:
            if self.keystore_type == "PKCS12":
                chain_pem, key_pem = _pkcs12_to_pem(
                    self.keystore, self.keystore_password, self.key_password
                )
                return ca, chain_pem.decode(), key_pem.decode()
            text = Path(self.keystore).read_bytes()
            key_text = Path(self.keyfile).read_bytes() if self.keyfile else text
        except (OSError, ValueError) as exc:
            raise TlsMaterialError("ssl.keystore.location", _reason(exc)) from None
        chain = b"".join(
            block for block in _pem_blocks(text) if b"CERTIFICATE" in block.split(b"\n", 1)[0]
        )
        keys = [
            block for block in _pem_blocks(key_text) if b"PRIVATE KEY" in block.split(b"\n", 1)[0]
        ]
        if not keys:
            raise TlsMaterialError(
                "ssl.keyfile" if self.keyfile else "ssl.keystore.location",
                "no private key in the file",
            )
        try:
            private = load_pem_private_key(
                keys[0], self.key_password.encode() if self.key_password else None
            )
        except (ValueError, TypeError) as exc:
            raise TlsMaterialError("ssl.key.password", _reason(exc)) from None
        key = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        return ca, chain.decode(), key.decode()

    def _load_trust(self, context: ssl.SSLContext) -> None:
        assert self.truststore is not None
        try:
            if self.truststore_type == "PKCS12":
                from cryptography.hazmat.primitives.serialization import Encoding

                bundle = _read_pkcs12(self.truststore, self.truststore_password)
                certificates = [c.certificate for c in bundle.additional_certs] + (
                    [bundle.cert.certificate] if bundle.cert else []
                )
                if not certificates:
                    raise ValueError("the store holds no certificate")
                context.load_verify_locations(
                    cadata="".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)
                )
            else:
                context.load_verify_locations(self.truststore)
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise TlsMaterialError("ssl.truststore.location", _reason(exc)) from None

    def _load_key(self, context: ssl.SSLContext) -> None:
        assert self.keystore is not None
        if self.keystore_type == "PKCS12":
            try:
                certfile_pem, key_pem = _pkcs12_to_pem(
                    self.keystore, self.keystore_password, self.key_password
                )
            except (OSError, ValueError) as exc:
                raise TlsMaterialError("ssl.keystore.location", _reason(exc)) from None
            _load_chain_from_memory(context, certfile_pem + key_pem)
            return
        try:
            context.load_cert_chain(self.keystore, self.keyfile, password=self.key_password or None)
        except (OSError, ssl.SSLError) as exc:
            if isinstance(exc, ssl.SSLError) and _key_does_not_decrypt(
                self.keyfile or self.keystore, self.key_password
            ):
                raise TlsMaterialError(
                    "ssl.key.password", "the private key does not decrypt with it"
                ) from None
            raise TlsMaterialError(
                "ssl.keyfile" if self.keyfile else "ssl.keystore.location", _reason(exc)
            ) from None


def _pem_blocks(text: bytes) -> list[bytes]:
    """The -----BEGIN ...----- / -----END ...----- blocks of a PEM file, each whole."""
    blocks = []
    for part in text.split(b"-----BEGIN ")[1:]:
        end = part.find(b"-----END ")
        if end >= 0:
            close = part.find(b"-----", end + len(b"-----END "))
            blocks.append(b"-----BEGIN " + part[: close + 5] + b"\n")
    return blocks


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.replace("\n", " ")


def _read_pkcs12(path: str, password: str | None):  # -> PKCS12KeyAndCertificates
    from cryptography.hazmat.primitives.serialization import pkcs12

    data = Path(path).read_bytes()
    return pkcs12.load_pkcs12(data, password.encode() if password else None)


def _key_does_not_decrypt(path: str, password: str | None) -> bool:
    """Whether the PEM file holds an encrypted private key that ``password`` does not open."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        text = Path(path).read_bytes()
    except OSError:
        return False
    start = text.find(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    if start < 0:
        return False
    try:
        load_pem_private_key(text[start:], password.encode() if password else None)
    except (ValueError, TypeError):
        return True
    return False


def _pkcs12_to_pem(
    path: str, store_password: str | None, key_password: str | None
) -> tuple[bytes, bytes]:
    """Certificate chain and unencrypted key, in PEM, from a PKCS12 key store, opened with the
    store password (Java tools write PKCS12 stores whose key has the same password)."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    bundle = _read_pkcs12(path, store_password or key_password)
    if bundle.key is None or bundle.cert is None:
        raise ValueError("the store holds no private key with its certificate")
    chain = [bundle.cert.certificate] + [c.certificate for c in bundle.additional_certs]
    certs = b"".join(c.public_bytes(Encoding.PEM) for c in chain)
    key = bundle.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    return certs, key


def _load_chain_from_memory(context: ssl.SSLContext, pem: bytes) -> None:
    """ssl can only load a key from a file: write it to a private temporary file, load it,
    and remove it at once (the key never stays on disk unencrypted)."""
    directory = tempfile.mkdtemp(prefix="throttle-tls-")  # mode 0700
    path = os.path.join(directory, "chain.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        context.load_cert_chain(path)
    finally:
        try:
            os.unlink(path)
        finally:
            os.rmdir(directory)
