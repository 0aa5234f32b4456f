"""One audit line per write: who asked to change which quota entity, and what came of it.

    PUT /quotas/overrides user="alice" client-id="<default>" outcome=accepted status=200 client=10.0.0.7

Outcomes: ``accepted`` (2xx), ``refused`` (401/403: no token, a wrong one, or changes
disabled), ``rejected`` (another 4xx: an invalid or too large request, a conflict, nothing to
delete), ``failed`` (5xx), ``abandoned`` (the client left before an answer); refusals are
warnings, the rest information. The line never holds the token or the body. Names come from the
request as sent: quoted and escaped, so a name with a line break stays on its line, and cut to
their first 200 characters, as is the path. The same facts go with the record as fields
(``event="audit"``, method, path, entity, outcome, status, client), which JSON log lines carry
(app/server/runtime/log_format.py). Refusals are logged at most once a minute per client and status,
the next line counting those left out: a client without the token cannot fill the log."""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.edge.admission import is_node_report, is_write
from app.server.edge.problems import logged_path
from app.server.edge.refusal_log import RefusalLog, bounded, quoted

logger = logging.getLogger(__name__)

GROUPS_PATH = "/quotas/groups/"
ENTITY_QUERY = ("user", "client-id")
MAX_NAMED = 4  # names taken from one query, however many it repeats


def outcome(status: int) -> str:
    if status < 400:
        return "accepted"
    if status in (401, 403):
        return "refused"
    return "rejected" if status < 500 else "failed"


def entity_fields(scope: Scope) -> dict[str, str]:
    """The entity a write names: a group by its path, an override by its query (names cut
    to their first 200 characters, at most MAX_NAMED of them)."""
    path: str = scope["path"]
    if path.startswith(GROUPS_PATH):
        return {"group": bounded(path[len(GROUPS_PATH) :])}
    query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    return {
        key: bounded(value)
        for key, value in [pair for pair in query if pair[0] in ENTITY_QUERY][:MAX_NAMED]
    }


def entity_text(fields: dict[str, str]) -> str:
    """The entity for the text line, each name quoted and escaped as a JSON string (ASCII
    only, control characters escaped)."""
    return " ".join(f"{key}={quoted(value)}" for key, value in fields.items())


class AuditLog:
    def __init__(self, app: ASGIApp, refusals: RefusalLog | None = None) -> None:
        self.app = app
        self.refusals = refusals or RefusalLog()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_write(scope):
            return await self.app(scope, receive, send)
        status: int | None = None

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        except Exception:
            self._log(scope, 500 if status is None else status)  # answered 500 further out
            raise
        self._log(scope, status)

    def _log(self, scope: Scope, status: int | None) -> None:
        client = scope.get("client")
        host = client[0] if client else "-"
        path = logged_path(scope)
        named_fields = entity_fields(scope)
        named = entity_text(named_fields)
        result = (
            "abandoned" if status is None else outcome(status)
        )  # the client left before an answer
        if result != "refused" and is_node_report(scope):
            return  # a node's report of its volumes changes no quota: only its refusals are audited
        fields = {
            "event": "audit",
            "method": scope["method"],
            "path": path,
            "entity": named_fields,
            "outcome": result,
            "status": status,
            "client": client[0] if client else None,
        }
        line = "%s %s%s outcome=%s status=%s client=%s"
        args = (scope["method"], path, f" {named}" if named else "", result, status or "-", host)
        if result == "refused":
            self.refusals.log(logger, logging.WARNING, host, str(status), line, *args, extra=fields)
        else:
            logger.info(line, *args, extra=fields)
