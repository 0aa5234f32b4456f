"""How the service serves HTTP: uvicorn with the h11 parser and a bounded request head."""

from __future__ import annotations

import logging

import uvicorn
from fastapi import FastAPI

from app.settings import Settings

# h11, not httptools: with httptools a request carrying "Upgrade: h2c" (every http:// request
# of Java's java.net.http.HttpClient) reaches the app without its body (Kludex/uvicorn#2722).
# h11 is pure Python and costs throughput; BENCHMARKS.md has the figures.
HTTP_PARSER = "h11"
# The request line and every header together; a longer head is refused with 400 before the
# app sees it (h11 buffers at most this much of an incomplete head).
MAX_REQUEST_HEAD_BYTES = 16 * 1024


class _IgnoredUpgradeFilter(logging.Filter):
    """An HTTP/1.1 server may ignore Upgrade (RFC 9110 7.8); every request of Java's HttpClient
    asks for h2c, so the warning would otherwise be one line per request."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Unsupported upgrade request."


def serve(app: FastAPI, settings: Settings) -> None:
    logging.getLogger("uvicorn.error").addFilter(_IgnoredUpgradeFilter())
    uvicorn.run(
        app,
        http=HTTP_PARSER,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        host=settings.http_host,
        port=settings.http_port,
        ssl_certfile=settings.http_ssl_certfile,
        ssl_keyfile=settings.http_ssl_keyfile,
        log_level=settings.log_level.lower(),
        access_log=False,
        # JSON lines: uvicorn's records go to the service's handler instead of its own text one.
        **({"log_config": None} if settings.log_format == "json" else {}),
    )
