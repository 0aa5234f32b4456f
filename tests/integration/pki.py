"""Certificates for the security tests, made with openssl and keytool as an operator would.

A test CA signs the brokers' certificate, the service's HTTPS certificate and the admin
client's certificates; a second CA, which nobody trusts, signs a client certificate the
brokers must refuse. Every certificate names 127.0.0.1, so host names are verified."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools.commands import run_command

STORE_PASSWORD = "store-pass-8d1c"  # the brokers' and the shim's stores (not under test)


def _run(*args: str, cwd: Path) -> None:
    run_command(args, 120, cwd=cwd, check=True)


@dataclass(frozen=True)
class Leaf:
    cert: Path  # PEM certificate
    key: Path  # PEM private key (PKCS#8; encrypted when made with a password)
    bundle: Path  # certificate followed by the key: a PEM key store
    pkcs12: Path  # certificate and key, encrypted with the password given (or STORE_PASSWORD)


class Pki:
    def __init__(self, directory: Path) -> None:
        for tool in ("openssl", "keytool"):
            if shutil.which(tool) is None:
                pytest.fail(f"{tool} is needed to make the test certificates")
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_cert, self.ca_key = self._ca("ca")
        self.rogue_ca_cert, self.rogue_ca_key = self._ca("rogue-ca")

    def _ca(self, name: str) -> tuple[Path, Path]:
        cert, key = self.dir / f"{name}.pem", self.dir / f"{name}.key"
        _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", str(key), "-out", str(cert), cwd=self.dir)
        return cert, key

    def leaf(self, name: str, key_password: str | None = None, rogue: bool = False) -> Leaf:
        """A certificate for 127.0.0.1 signed by the test CA (or the untrusted one)."""
        ca_cert, ca_key = (self.rogue_ca_cert, self.rogue_ca_key) if rogue else (self.ca_cert, self.ca_key)
        plain_key, csr, cert = self.dir / f"{name}.plain.key", self.dir / f"{name}.csr", self.dir / f"{name}.pem"
        ext = self.dir / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(plain_key), "-out", str(csr), cwd=self.dir)
        _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "2", "-extfile", str(ext), "-out", str(cert), cwd=self.dir)
        key = self.dir / f"{name}.key"
        if key_password:
            _run("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", str(plain_key), "-out", str(key),
                 "-passout", f"pass:{key_password}", cwd=self.dir)
        else:
            _run("openssl", "pkcs8", "-topk8", "-nocrypt", "-in", str(plain_key), "-out", str(key), cwd=self.dir)
        bundle = self.dir / f"{name}.bundle.pem"
        bundle.write_bytes(cert.read_bytes() + key.read_bytes())
        pkcs12 = self.dir / f"{name}.p12"
        _run("openssl", "pkcs12", "-export", "-in", str(cert), "-inkey", str(plain_key), "-certfile", str(ca_cert),
             "-name", name, "-out", str(pkcs12), "-passout", f"pass:{key_password or STORE_PASSWORD}", cwd=self.dir)
        plain_key.unlink()
        return Leaf(cert, key, bundle, pkcs12)

    def truststore(self, name: str, password: str = STORE_PASSWORD) -> Path:
        """A PKCS12 trust store holding the test CA, made by keytool (as for a JVM)."""
        path = self.dir / f"{name}.p12"
        _run("keytool", "-importcert", "-noprompt", "-alias", "test-ca", "-file", str(self.ca_cert), "-keystore", str(path),
             "-storetype", "PKCS12", "-storepass", password, cwd=self.dir)
        return path
