"""PUT /nodes/{node_id}/volumes: a node's shim reports its own volumes, its data dirs and the
metadata log's (docs/architecture.md, "Observing metadata volumes" and "Two sources: admin
rounds and node reports")."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request, Response
from fastapi.security import HTTPBearer

from app.server.api.routes.route_set import RouteSet
from app.server.api.schemas.nodes import NodeVolumesBody
from app.server.api.state import service_state
from app.server.edge.problems import ProblemError, problem_responses
from app.server.edge.query import strict_query
from app.server.runtime.node_admission import UNLISTED_NODES
from app.server.runtime.node_intake import TooSoon, UnknownNode
from app.server.runtime.report_rate import BURST, MIN_INTERVAL_SECONDS

routes = RouteSet(tags=["nodes"])
# Declares the node token in the OpenAPI document; app.server.edge.admission checks it before the body is read.
node_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="NodeToken",
    description="The token of throttle.service.node.token",
)


@routes.put(
    "/nodes/{node_id}/volumes",
    status_code=204,
    summary="A node's report of its own volumes (data dirs and the metadata log's), sent by its shim every poll interval and on change",
    description="Authenticated with the node token (throttle.service.node.token), not the admin token; answered 404 while "
    "it is unset. Each report replaces the node's previous one and stays valid for the validity duration. Its data dirs "
    "are observations of the data decision beside DescribeLogDirs' (the newer of the two, the more conservative while "
    "they disagree); its metadata volumes are judged by the metadata limits. Per node, "
    f"{BURST} reports in a row are taken, then one per {round(MIN_INTERVAL_SECONDS * 1000)} ms (429 with Retry-After "
    "beyond that).",
    dependencies=[Depends(node_bearer), Depends(strict_query)],
    responses={
        **problem_responses(400, 401, 404, 409, 413, 422),
        429: {
            **problem_responses(429)[429],
            "headers": {
                "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait"}
            },
        },
    },
)
async def put_node_volumes(
    request: Request,
    body: NodeVolumesBody,
    node_id: Annotated[int, Path(ge=0, le=2**31 - 1, description="The node's node.id")],
) -> Response:
    refusal = service_state(request).offer_node_report(
        node_id, lambda now: body.report(node_id, now)
    )
    if isinstance(refusal, UnknownNode):
        detail = (
            f"node {node_id} is not a broker the cluster has registered, and {UNLISTED_NODES} other nodes DescribeCluster "
            "does not list (controllers, nodes starting) report already; a broker's report is taken once a round lists it"
        )
        raise ProblemError(409, "Unknown node", detail)
    if isinstance(refusal, TooSoon):
        detail = (
            f"node {node_id} reports too fast: {BURST} reports in a row are taken, then one per "
            f"{round(MIN_INTERVAL_SECONDS * 1000)} ms"
        )
        raise ProblemError(
            429, "Too many requests", detail, headers={"Retry-After": str(refusal.retry_after)}
        )
    return Response(status_code=204)
