"""The committed OpenAPI document is the one the app generates."""

from app.openapi import DEFAULT_PATH, render


def test_committed_openapi_document_matches_the_app():
    assert DEFAULT_PATH.read_text() == render(), "openapi/openapi.json is stale: run python -m app.openapi"


def test_openapi_documents_the_decision_endpoints():
    import json

    document = json.loads(render())
    paths = document["paths"]
    for path in ("/throttle-factor", "/volumes", "/healthz", "/readyz", "/metrics"):
        assert path in paths
    parameters = paths["/throttle-factor"]["get"]["parameters"]
    assert [p["name"] for p in parameters] == ["wait"]
    assert "ThrottleDecision" in document["components"]["schemas"]
