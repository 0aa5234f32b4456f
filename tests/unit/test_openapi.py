"""The committed OpenAPI document is the one the app generates."""

from devtools.openapi import DEFAULT_PATH, render


def test_committed_openapi_document_matches_the_app():
    assert DEFAULT_PATH.read_text() == render(), "openapi/openapi.json is stale: run python -m devtools.openapi"


def test_openapi_documents_the_decision_endpoints():
    import json

    document = json.loads(render())
    paths = document["paths"]
    for path in ("/throttle-factor", "/volumes", "/healthz", "/readyz", "/metrics"):
        assert path in paths
    parameters = paths["/throttle-factor"]["get"]["parameters"]
    assert [p["name"] for p in parameters] == ["wait"]
    assert "ThrottleDecision" in document["components"]["schemas"]


def _resolve(document, schema):
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_every_endpoint_documents_its_responses_with_schemas_and_examples():
    import json

    document = json.loads(render())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert not operation["operationId"].endswith(f"_{method}"), operation["operationId"]  # readable client names
            successes = [code for code in operation["responses"] if code.startswith("2")]
            assert successes, f"{method} {path}: no success response"
            for code, response in operation["responses"].items():
                for media, content in response.get("content", {}).items():
                    schema = _resolve(document, content.get("schema", {}))
                    assert schema, f"{method} {path} {code} {media}: no schema"
                    if code.startswith("2") or media == "application/problem+json":
                        assert "examples" in schema or "example" in content, f"{method} {path} {code} {media}: no example"


def test_request_bodies_are_plain_objects_that_client_generators_understand():
    # A top-level anyOf (say, "at least one of these properties") makes openapi-generator's Java
    # generators emit a wrapper around one alternative: a group body without its limits, a
    # quota body holding one type only. Rules across properties live in descriptions and the
    # server's 422 instead (tests/integration/test_generated_clients.py).
    import json

    document = json.loads(render())
    bodies = [
        (f"{method} {path}", operation["requestBody"]["content"]["application/json"]["schema"])
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    ]
    assert len(bodies) == 5
    seen: set[str] = set()
    while bodies:
        where, schema = bodies.pop()
        schema = _resolve(document, schema)
        if schema["title"] in seen:
            continue
        seen.add(schema["title"])
        assert schema["type"] == "object" and schema["properties"], where
        assert not {"anyOf", "oneOf", "allOf", "not"} & set(schema), f"{where}: {schema['title']} composes schemas at its top"
        bodies += [(f"{where} {name}", s) for name, s in schema["properties"].items() if "$ref" in s]
    assert seen == {"QuotaLimitsBody", "GroupBody", "EnforcementBody", "NodeVolumesBody", "CandidateLimits", "HardLimit", "LimitLevel", "HysteresisLevel"}


def _schemas_in(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _schemas_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas_in(value)


def test_integer_bounds_are_exact_integers_in_json_schema_words():
    """FastAPI's model of the document holds bounds as floats: a byte count's maximum came out
    as 9.223372036854776e+18 (2^63, which the service refuses); and bounds set before a
    validator came out as pydantic's ge/le, which JSON Schema ignores (negatives allowed)."""
    import json

    document = json.loads(render())
    integers = [s for s in _schemas_in(document) if s.get("type") == "integer"]
    assert integers
    for schema in integers:
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            assert not isinstance(schema.get(key), float), schema
    assert not [s for s in _schemas_in(document) if {"ge", "le", "gt", "lt"} & set(s) and "type" in s]
    schemas = document["components"]["schemas"]
    byte_counts = [
        schemas["NodeVolumeEntry"]["properties"]["total_bytes"],
        schemas["NodeVolumeEntry"]["properties"]["usable_bytes"],
        schemas["HardLimit"]["properties"]["min_available_bytes"],
        schemas["LimitLevel"]["properties"]["min_available_bytes"],
        schemas["HysteresisLevel"]["properties"]["bytes"],
    ]
    for schema in byte_counts:
        assert (schema["minimum"], schema["maximum"]) == (0, 2**63 - 1), schema
