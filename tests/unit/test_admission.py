"""What a request passes before a route (in-process): the token rule agrees with the OpenAPI
document, the body limit is the configured one, an unexpected error is a problem+json 500,
and the audit line keeps a hostile name on one line. The real server is covered in
tests/integration/test_hostile_requests.py."""

import logging

from app.clock import ManualClock
from app.server.edge.admission import NODE_PATH_PREFIX, READ_METHODS, READ_ONLY_POSTS, is_write
from app.server.app import create_app
from app.settings import load_settings

from .asgi import run_scenario

TOKEN = "s3cret-admin-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def make_app(tmp_path, **overrides):
    settings = load_settings(
        environ={},
        storage_check_interval="PT0S",
        storage_per_volume_limit_min_available_bytes="100",
        data_dir=str(tmp_path),
        admin_token=TOKEN,
        **overrides,
    )
    return create_app(settings, clock=ManualClock(), observe=False)


def test_every_write_is_documented_as_needing_the_token_and_no_read_is(tmp_path):
    schema = make_app(tmp_path).openapi()
    operations = [(path, method.upper(), operation) for path, item in schema["paths"].items() for method, operation in item.items()]
    assert {method for _, method, _ in operations} == {"GET", "POST", "PUT", "DELETE"}
    for path, method, operation in operations:
        write = is_write({"type": "http", "method": method, "path": path})
        assert write == (method not in READ_METHODS and path not in READ_ONLY_POSTS)
        assert bool(operation.get("security")) == write, operation["operationId"]
        if write:
            # a node's report is answered 401 for a wrong token too, and 404 without a node token
            refused = {"401", "404"} if path.startswith(NODE_PATH_PREFIX) else {"401", "403"}
            assert refused | {"413"} <= set(operation["responses"]), operation["operationId"]
        if method not in READ_METHODS:
            assert "413" in operation["responses"], operation["operationId"]


def test_a_read_only_post_needs_no_token_and_writes_no_audit_line_but_its_body_is_limited(tmp_path, caplog):
    body = b'{"hard": {"min_available_bytes": 100}}'

    async def scenario(client, observer, clock):
        with caplog.at_level(logging.INFO, logger="app.server.api.audit"):
            fits = await client.post("/what-if", content=body + b" " * (1024 - len(body)), headers={"Content-Type": "application/json"})
        assert fits.status_code == 200, fits.text
        assert not [r for r in caplog.records if r.name == "app.server.api.audit"]
        over = await client.post("/what-if", content=body + b" " * (1025 - len(body)), headers={"Content-Type": "application/json"})
        assert over.status_code == 413 and over.headers["content-type"] == "application/problem+json"

    run_scenario(make_app(tmp_path, http_max_body_bytes="1024"), ManualClock(), scenario)


def test_the_body_limit_is_the_configured_one(tmp_path):
    body = b'{"produce": 500000}'

    async def scenario(client, observer, clock):
        fits = await client.put("/quotas/overrides", params={"user": "a"}, content=body + b" " * (1024 - len(body)), headers=AUTH)
        assert fits.status_code == 200, fits.text
        over = await client.put("/quotas/overrides", params={"user": "a"}, content=body + b" " * (1025 - len(body)), headers=AUTH)
        assert over.status_code == 413 and over.headers["content-type"] == "application/problem+json"
        assert over.json()["detail"] == "the request body is larger than 1024 bytes (throttle.service.http.max.body.bytes)"

    run_scenario(make_app(tmp_path, http_max_body_bytes="1024"), ManualClock(), scenario)


def test_an_unexpected_error_in_a_route_is_a_problem_json_500(tmp_path, caplog):
    app = make_app(tmp_path)

    @app.get("/broken")
    async def broken() -> None:
        raise RuntimeError("internal detail")

    async def scenario(client, observer, clock):
        response = await client.get("/broken")
        assert response.status_code == 500 and response.headers["content-type"] == "application/problem+json"
        assert response.json()["instance"] == "/broken" and "internal detail" not in response.text
        head = await client.head("/broken")
        assert (head.status_code, head.content) == (500, b"")

    with caplog.at_level(logging.ERROR, logger="app.server.edge.problems"):
        run_scenario(app, ManualClock(), scenario)
    assert "internal detail" in caplog.text  # the traceback is in the log


def test_an_audit_line_escapes_names_and_never_holds_the_token_or_body(tmp_path, caplog):
    async def scenario(client, observer, clock):
        await client.put("/quotas/overrides", params={"user": "eve\r\nforged line", "client-id": "<default>"}, json={"produce": 77}, headers={"Authorization": "Bearer x"})
        await client.put("/quotas/overrides", params={"user": "ann"}, json={"produce": 88000}, headers=AUTH)
        await client.put("/quotas/groups/g1", json={"users": []}, headers=AUTH)

    with caplog.at_level(logging.INFO, logger="app.server.api.audit"):
        run_scenario(make_app(tmp_path), ManualClock(), scenario)
    lines = [record.getMessage() for record in caplog.records if record.name == "app.server.api.audit"]
    assert lines == [
        'PUT /quotas/overrides user="eve\\r\\nforged line" client-id="<default>" outcome=refused status=403 client=127.0.0.1',
        'PUT /quotas/overrides user="ann" outcome=accepted status=200 client=127.0.0.1',
        'PUT /quotas/groups/g1 group="g1" outcome=rejected status=422 client=127.0.0.1',
    ]
    assert [record.levelname for record in caplog.records if record.name == "app.server.api.audit"] == ["WARNING", "INFO", "INFO"]
