"""The service serves HTTPS when given a certificate and key (for shims that require TLS)."""

from __future__ import annotations

import shutil
import ssl

import httpx
import pytest

from devtools.commands import run_command

from .conftest import free_port


def test_service_answers_over_https_with_the_configured_certificate(tmp_path, start_service):
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    run_command(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        60, check=True,
    )
    port = free_port()
    service = start_service(
        storage_check_interval="PT0S",
        storage_per_volume_limit_min_available_ratio="0.05",
        http_port=str(port),
        http_ssl_certfile=str(cert),
        http_ssl_keyfile=str(key),
        ready_url=f"https://127.0.0.1:{port}",
        ready_verify=str(cert),
    )
    context = ssl.create_default_context(cafile=str(cert))
    response = httpx.get(f"https://127.0.0.1:{port}/throttle-factor", verify=context)
    assert response.status_code == 200 and response.json()["source"] == "disabled"
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)  # no plain HTTP on the TLS port
    assert service.process.poll() is None
