"""One audit line per write: who asked to change which quota entity, and what came of it.

    PUT /quotas/overrides user="alice" client-id="<default>" outcome=accepted status=200 client=10.0.0.7

Outcomes: ``accepted`` (2xx), ``refused`` (401/403: no token, a wrong one, or changes
disabled), ``rejected`` (another 4xx: an invalid or too large request, a conflict, nothing to
delete), ``failed`` (5xx), ``abandoned`` (the client left before an answer); refusals are
warnings, the rest information. The line never holds the token or the body. Names come from the
request as sent: quoted and escaped, so a name with a line break stays on its line. The same
facts go with the record as fields (``event="audit"``, method, path, entity, outcome, status,
client), which JSON log lines carry (app/server/log_format.py)."""

from __future__ import annotations

import json
import logging
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.admission import is_write
from app.server.problems import logged_path

logger = logging.getLogger(__name__)

GROUPS_PATH = "/quotas/groups/"
ENTITY_QUERY = ("user", "client-id")
MAX_NAME_CHARS = 200


def outcome(status: int) -> str:
    if status < 400:
        return "accepted"
    if status in (401, 403):
        return "refused"
    return "rejected" if status < 500 else "failed"


def _cut(name: str) -> str:
    return name[:MAX_NAME_CHARS] + "..." if len(name) > MAX_NAME_CHARS else name


def entity_fields(scope: Scope) -> dict[str, str]:
    """The entity a write names: a group by its path, an override by its query (names cut
    at MAX_NAME_CHARS)."""
    path: str = scope["path"]
    if path.startswith(GROUPS_PATH):
        return {"group": _cut(path[len(GROUPS_PATH) :])}
    query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    return {key: _cut(value) for key, value in query if key in ENTITY_QUERY}


def entity_text(fields: dict[str, str]) -> str:
    """The entity for the text line, each name quoted and escaped as a JSON string (ASCII
    only, control characters escaped)."""
    return " ".join(f"{key}={json.dumps(value)}" for key, value in fields.items())


class AuditLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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

    @staticmethod
    def _log(scope: Scope, status: int | None) -> None:
        client = scope.get("client")
        path = logged_path(scope)
        named_fields = entity_fields(scope)
        named = entity_text(named_fields)
        result = "abandoned" if status is None else outcome(status)  # the client left before an answer
        fields = {
            "event": "audit",
            "method": scope["method"],
            "path": path,
            "entity": named_fields,
            "outcome": result,
            "status": status,
            "client": client[0] if client else None,
        }
        logger.log(
            logging.WARNING if result == "refused" else logging.INFO,
            "%s %s%s outcome=%s status=%s client=%s",
            scope["method"], path, f" {named}" if named else "", result, status or "-", client[0] if client else "-",
            extra=fields,
        )
