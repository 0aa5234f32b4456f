"""/docs (Swagger UI) and /redoc (ReDoc) render from assets the service ships, in headless
Chromium with every address but loopback closed: an air-gapped host sees the whole API."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from devtools.commands import run_command

from .conftest import free_port, launch_service

NO_KAFKA = {"storage_check_interval": "PT0S", "storage_per_volume_limit_min_available_bytes": "100"}


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    browser = shutil.which("chromium")
    assert browser, "Debian's chromium is needed (.ci/run installs it)"
    command = [
        browser,
        "--headless",
        "--no-sandbox",  # the tests run as root
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        # Every request beyond loopback goes to a proxy port where nothing listens: a CDN is
        # unreachable, as on a host without internet access.
        f"--proxy-server=127.0.0.1:{free_port()}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=15000",  # until the scripts have fetched /openapi.json and rendered
        *args,
    ]
    return run_command(command, 120)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    running = launch_service(tmp_path_factory.mktemp("docs"), **NO_KAFKA)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def operations(service) -> dict[str, str]:
    """path -> summary of each documented GET."""
    document = service.client.get("/openapi.json").json()
    return {path: item["get"]["summary"] for path, item in document["paths"].items() if "get" in item}


def assets_of(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*[=:]\s*['"]([^'"]+)['"]""", html)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_page_loads_nothing_from_another_host(service, page):
    response = service.client.get(page)
    assert response.status_code == 200
    assets = assets_of(response.text)
    assert assets, response.text
    assert [url for url in assets if not url.startswith("/")] == [], "every asset comes from the service itself"
    for url in assets:
        assert service.client.get(url).status_code == 200, url


def test_swagger_ui_renders_every_operation_without_the_network(service, operations, tmp_path):
    dom = chromium(tmp_path / "profile", "--dump-dom", f"{service.base_url}/docs")
    assert dom.returncode == 0, dom.stderr[-2000:]
    shown = set(re.findall(r'data-path="([^"]+)"', dom.stdout))
    assert set(operations) <= shown, dom.stdout[-2000:]
    for summary in operations.values():
        assert summary in dom.stdout
    assert problems(dom.stderr) == []


def test_redoc_renders_every_operation_without_the_network(service, operations, tmp_path):
    dom = chromium(tmp_path / "profile", "--dump-dom", f"{service.base_url}/redoc")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Kafka throttle decision service" in dom.stdout
    for summary in operations.values():
        assert summary in dom.stdout, summary
    assert problems(dom.stderr) == []
    shot = tmp_path / "redoc.png"
    rendered = chromium(tmp_path / "profile-2", f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars", f"{service.base_url}/redoc")
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    assert len(shot.read_bytes()) > 50_000  # text and code samples, not a blank page


def problems(log: str) -> list[str]:
    """Scripts that failed, and resources that did not load."""
    return [line for line in log.splitlines() if "Uncaught" in line or "Failed to load resource" in line or "net::ERR_" in line]
