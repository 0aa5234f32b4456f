"""RFC 9457 problem details for every error the API returns."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.quotas.kafka_store import StoreUnavailable
from app.redaction import printable
from app.server.edge.refusal_log import bounded

PROBLEM_JSON = "application/problem+json"
logger = logging.getLogger(__name__)

# A problem document stays small whatever the request held (a body of 80,000 unknown keys got a
# 9.9 MB answer listing each twice): at most MAX_ERRORS errors, with the count of the rest; a
# field or an instance cut after SHOWN_CHARS characters, a message after MESSAGE_CHARS, the
# detail after MAX_DETAIL_CHARS; and errors left out (and counted) until the document holds in
# MAX_PROBLEM_BYTES.
MAX_ERRORS = 20
SHOWN_CHARS = 200
MESSAGE_CHARS = 600
MAX_DETAIL_CHARS = 4000
MAX_PROBLEM_BYTES = 32 * 1024


def logged_path(scope: Scope) -> str:
    """The request's path for a log line: the raw path, percent-encoded as sent, so a hostile
    path holds no control characters and cannot break the line; its first 200 characters."""
    return bounded(
        (scope.get("raw_path") or b"").decode("ascii", "backslashreplace") or scope["path"]
    )


class Problem(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "type": "about:blank",
                    "title": "Invalid request",
                    "status": 422,
                    "detail": "produce: Input should be greater than 0",
                    "instance": "/quotas/overrides",
                    "errors": [
                        {
                            "field": "produce",
                            "in": "body",
                            "message": "Input should be greater than 0",
                        }
                    ],
                }
            ]
        }
    )

    type: str = Field(
        default="about:blank", description="A URI reference identifying the problem type"
    )
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, Any]] | None = Field(
        default=None,
        description=f"Per-field validation errors, naming each field: the first {MAX_ERRORS}",
        max_length=MAX_ERRORS,
    )
    more_errors: int | None = Field(
        default=None,
        ge=1,
        description=f"How many errors there were beyond the {MAX_ERRORS} listed in errors",
    )


class ProblemError(Exception):
    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        headers: dict[str, str] | None = None,
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.headers = headers
        self.errors = errors


def field_error(field: str, location: str, message: str) -> dict[str, str]:
    return {"field": field, "in": location, "message": message}


def errors_detail(errors: list[dict[str, Any]]) -> str:
    """The errors in one sentence: the first MAX_ERRORS, then how many more."""
    listed = "; ".join(
        f"{_shown(str(e['field']), SHOWN_CHARS)}: {_shown(str(e['message']), MESSAGE_CHARS)}"
        for e in errors[:MAX_ERRORS]
    )
    more = len(errors) - MAX_ERRORS
    return listed if more <= 0 else f"{listed}; and {more:,} more"


def _shown(text: str, limit: int) -> str:
    """A text of the request as a problem echoes it: its control characters escaped by the rule
    of every echoed value (redaction.printable: a client printing the detail gets no ANSI
    escape, no line break of the request's), cut after ``limit`` characters."""
    return bounded(printable(text), limit)


def _bounded_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            key: _shown(value, MESSAGE_CHARS if key == "message" else SHOWN_CHARS)
            if isinstance(value, str)
            else value
            for key, value in error.items()
        }
        for error in errors[:MAX_ERRORS]
    ]


class InvalidRequest(ProblemError):
    """A 422 naming each refused field, like the answer to a request the schema refuses."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(422, "Invalid request", errors_detail(errors), errors=errors)


def problem_json(
    instance: str,
    status: int,
    title: str,
    detail: str | None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The answer to a request for ``instance`` (its path); also an ASGI app, for middleware.
    Bounded: MAX_ERRORS errors and the count of the rest, texts cut (MAX_PROBLEM_BYTES)."""
    listed = None if errors is None else _bounded_errors(errors)
    more = len(errors) - len(listed) if errors is not None and listed is not None else 0
    while True:
        body = Problem(
            title=title,
            status=status,
            detail=None if detail is None else _shown(detail, MAX_DETAIL_CHARS),
            instance=_shown(instance, SHOWN_CHARS),
            errors=listed,
            more_errors=more or None,
        )
        answer = JSONResponse(
            body.model_dump(exclude_none=True),
            status_code=status,
            media_type=PROBLEM_JSON,
            headers=headers,
        )
        if len(answer.body) <= MAX_PROBLEM_BYTES or not listed:
            return answer
        listed, more = listed[:-1], more + 1


def problem_response(
    request: Request,
    status: int,
    title: str,
    detail: str | None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return problem_json(request.url.path, status, title, detail, errors, headers)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for problem+json answers."""
    schema = {"$ref": "#/components/schemas/Problem"}
    return {
        status: {"model": Problem, "content": {PROBLEM_JSON: {"schema": schema}}}
        for status in statuses
    }


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            field_error(
                ".".join(
                    str(part)
                    for part in error["loc"]
                    if part not in ("body", "query", "path", "header")
                )
                or "body",
                str(error["loc"][0]) if error["loc"] else "request",
                error["msg"],
            )
            for error in exc.errors()
        ]
        return problem_response(request, 422, "Invalid request", errors_detail(errors), errors)

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(request, exc.status, exc.title, exc.detail, exc.errors, exc.headers)

    @app.exception_handler(StoreUnavailable)
    async def _store_unavailable(request: Request, exc: StoreUnavailable) -> JSONResponse:
        # Writes need the shared store; reads keep serving the last table.
        return problem_response(
            request, 503, "Quota store unavailable", str(exc), headers={"Retry-After": "5"}
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else None
        title = {400: "Bad request", 404: "Not found", 405: "Method not allowed"}.get(
            exc.status_code, "HTTP error"
        )
        return problem_response(
            request, exc.status_code, title, detail, headers=getattr(exc, "headers", None)
        )


# A request the stop cut off: asked again in a second, of this replica once it is back or of another.
STOPPING_RETRY_AFTER_SECONDS = 1


class UnexpectedErrors:
    """An exception no handler answers becomes a problem+json 500 and a logged traceback. The
    client gets no internals, and its connection stays open (Starlette's own 500 is text/plain,
    and an exception that reaches uvicorn closes the connection). A request whose task is
    cancelled (a stop gives requests in progress a second, then cancels them) is answered 503
    with Retry-After and the connection closed, logged in one line: uvicorn would answer it a
    text/plain 500 and log a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def noting_start(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, noting_start)
        except asyncio.CancelledError:
            if started:
                raise  # too late for an answer: the server closes the connection
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # answered here: the request's task ends as answered
            logger.warning(
                "%s %s cut off by the stop: answered 503", scope["method"], logged_path(scope)
            )
            detail = "the service is stopping and gave up on this request; send it again"
            headers = {"Retry-After": str(STOPPING_RETRY_AFTER_SECONDS), "Connection": "close"}
            await problem_json(scope["path"], 503, "Service stopping", detail, headers=headers)(
                scope, receive, send
            )
        except Exception:
            logger.exception("%s %s failed", scope["method"], logged_path(scope))
            if started:
                raise  # too late for an answer: the server closes the connection
            detail = "the service failed to answer this request; its log has the details"
            await problem_json(scope["path"], 500, "Internal error", detail)(scope, receive, send)
