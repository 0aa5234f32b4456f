"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on a pipe: no
port and no client library. Loads a page at a given width, for the screen or for print,
reads boxes from the rendered DOM, prints the page to PDF and takes screenshots."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import time
from pathlib import Path
from typing import Any

# What the page tests read from the rendered DOM: per chart, the box of every text and the
# points of the data lines (in the same page coordinates); per table, its box and its
# header cells'; the page's own width.
MEASURE = """
(() => {
  const box = (r) => ({left: r.left, top: r.top, right: r.right, bottom: r.bottom});
  const charts = [...document.querySelectorAll('svg.chart')].map((svg) => {
    const ctm = svg.getScreenCTM();
    return {
      kind: svg.dataset.chart,
      box: box(svg.getBoundingClientRect()),
      texts: [...svg.querySelectorAll('text')].map((t) => ({text: t.textContent, ...box(t.getBoundingClientRect())})),
      lines: [...svg.querySelectorAll('polyline.series')].map((line) =>
        [...line.points].map((p) => { const q = p.matrixTransform(ctm); return [q.x, q.y]; })),
    };
  });
  const tables = [...document.querySelectorAll('table')].map((table) => ({
    name: table.dataset.table || table.querySelector("th").textContent,
    box: box(table.getBoundingClientRect()),
    scrollWidth: table.parentElement.scrollWidth,
    clientWidth: table.parentElement.clientWidth,
    headers: [...table.querySelectorAll('th')].map((th) => ({text: th.textContent, ...box(th.getBoundingClientRect())})),
  }));
  const page = document.documentElement;
  return {width: page.clientWidth, scrollWidth: page.scrollWidth, height: page.scrollHeight, charts, tables};
})()
"""


class Chromium:
    def __init__(self, profile: Path) -> None:
        browser = shutil.which("chromium")
        assert browser, "Debian's chromium is needed to render the report (.ci/run installs it)"
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        # Spawned without Python code in the child (the tests' process runs Spark's threads):
        # the pipe ends move to fds 3 and 4, where --remote-debugging-pipe reads and writes,
        # from copies numbered 10 and up, so that no move overwrites another.
        reading = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD_CLOEXEC, 10)
        writing = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD_CLOEXEC, 10)
        self._log = (profile.parent / f"{profile.name}-chromium.log").open("w")
        command = [
            browser,
            "--headless",
            "--no-sandbox",  # the tests run as root; the page has no script and needs no network
            "--disable-gpu",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "about:blank",
        ]
        moves = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, self._log.fileno(), 1),
            (os.POSIX_SPAWN_DUP2, self._log.fileno(), 2),
            (os.POSIX_SPAWN_DUP2, reading, 3),
            (os.POSIX_SPAWN_DUP2, writing, 4),
        ]
        self._pid = os.posix_spawn(browser, command, os.environ, file_actions=moves)
        for fd in (to_browser_read, from_browser_write, reading, writing):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Log", "Runtime"):
            self.page(f"{domain}.enable")

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60.0) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive(timeout)
            if reply.get("id") == self._next_id:
                assert "error" not in reply, (method, reply["error"])
                return reply["result"]
            self.events.append(reply)

    def page(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        return self.send(method, params, self._session, timeout)

    def _receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "Chromium did not answer in time"
            ready, _, _ = select.select([self._from_browser], [], [], remaining)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                assert chunk, "Chromium closed the pipe"
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _wait_for(self, method: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._receive(deadline - time.monotonic()))

    def load(self, url: str, width: int, height: int = 1000, media: str = "screen") -> None:
        self.page("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.page("Emulation.setEmulatedMedia", {"media": media})
        self.page("Page.navigate", {"url": url})
        self._wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"]["value"]

    def measure(self) -> dict:
        return self.evaluate(MEASURE)

    def errors(self) -> list[str]:
        """Console errors and failed loads logged so far."""
        return [
            event["params"]["entry"]["text"]
            for event in self.events
            if event.get("method") == "Log.entryAdded" and event["params"]["entry"]["level"] == "error"
        ] + [event["params"]["exceptionDetails"]["text"] for event in self.events if event.get("method") == "Runtime.exceptionThrown"]

    def print_to_pdf(self) -> bytes:
        """The page as printed: paper size and margins from its CSS ``@page``."""
        result = self.page("Page.printToPDF", {"preferCSSPageSize": True, "printBackground": True}, timeout=120)
        return base64.b64decode(result["data"])

    def screenshot(self, width: int) -> bytes:
        """The whole page at ``width``, as PNG."""
        height = self.evaluate("document.documentElement.scrollHeight")
        self.page("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        result = self.page("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, timeout=120)
        return base64.b64decode(result["data"])

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except AssertionError:
            pass
        deadline = time.monotonic() + 20
        while os.waitpid(self._pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
                break
            time.sleep(0.1)
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._log.close()
