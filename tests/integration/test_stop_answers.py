"""What a stop answers a request it cuts off, on the real command: a request still in progress
after the stop's grace second (here a body that has not all arrived) is answered 503
problem+json with Retry-After, dated, and logged in one line; no traceback, exit 0."""

from __future__ import annotations

import json
import signal
import socket
import time
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from .conftest import RunningService

TOKEN = "stop-answers-admin-token"
NO_KAFKA = {"storage_check_interval": "PT0S", "storage_per_volume_limit_min_available_ratio": "0.05", "admin_token": TOKEN}


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_request_the_stop_cuts_off_is_answered_503_problem_json_with_retry_after(start_service):
    service: RunningService = start_service(**NO_KAFKA)
    service.wait_ready()
    address = urlsplit(service.base_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        head = (
            "PUT /quotas/overrides?user=alice HTTP/1.1\r\nHost: service\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"produce": ')  # the rest of the body never comes
        time.sleep(0.5)
        service.process.send_signal(signal.SIGTERM)
        answer = read_until_closed(sock, 10)
    assert service.process.wait(10) == 0
    head_text, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head_text.decode().split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
    assert status == "HTTP/1.1 503 Service Unavailable", answer[:300]
    assert headers["content-type"] == "application/problem+json" and headers["retry-after"] == "1"
    assert parsedate_to_datetime(headers["date"]).tzinfo is not None
    problem = json.loads(body)
    assert (problem["status"], problem["title"], problem["instance"]) == (503, "Service stopping", "/quotas/overrides")
    log = service.log()
    assert "PUT /quotas/overrides cut off by the stop: answered 503" in log and "Traceback" not in log, log[-3000:]
    assert "Internal Server Error" not in answer.decode(errors="replace")
