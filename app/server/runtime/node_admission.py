"""Which nodes the node view takes reports from: the brokers the cluster has registered (the
latest round's DescribeCluster: active and fenced), and at most ``UNLISTED_NODES`` others at
once. DescribeCluster does not list controller-only nodes, so the controller quorum's voters
(three or five) report as unlisted nodes, beside brokers starting before a round lists them.
An unlisted node holds its place for a validity duration from its latest report, as its
report stays in the view. A report from any other node is refused with 409: a token holder
cannot fill the view (and the service's memory) with invented node ids.

With observation off (a check interval of PT0S) there is no round to list the brokers: every
node is unlisted, and up to UNOBSERVED_NODES are taken."""

from __future__ import annotations

from app.decision.decider import ThrottleDecider

# The voters of a quorum (3 or 5) and nodes starting before a round lists them.
UNLISTED_NODES = 16
# Without rounds: far beyond any cluster, so the view stays bounded.
UNOBSERVED_NODES = 10_000


class NodeAdmission:
    def __init__(self, unlisted_nodes: int = UNLISTED_NODES) -> None:
        self._unlisted_nodes = unlisted_nodes
        self._unlisted: dict[int, float] = {}  # node id -> its latest report taken
        self._round: object | None = None
        self._registered: frozenset[int] = frozenset()

    def admits(
        self, node_id: int, decider: ThrottleDecider, now: float, observing: bool = True
    ) -> bool:
        """Whether ``node_id``'s report is taken at ``now`` (and, for an unlisted node, counted);
        ``observing``: rounds list the cluster's brokers."""
        if node_id in self._registered_brokers(decider):
            self._unlisted.pop(node_id, None)
            return True
        limit = self._unlisted_nodes if observing else UNOBSERVED_NODES
        if node_id not in self._unlisted and len(self._unlisted) >= limit:
            validity = (
                decider.validity_seconds
            )  # places held by reports expired since are free again
            self._unlisted = {n: at for n, at in self._unlisted.items() if now - at <= validity}
            if len(self._unlisted) >= limit:
                return False
        self._unlisted[node_id] = now
        return True

    def unlisted(self) -> list[int]:
        return sorted(self._unlisted)

    def _registered_brokers(self, decider: ThrottleDecider) -> frozenset[int]:
        latest = decider.latest_round
        if latest is not self._round:  # once per round, not once per report
            self._round = latest
            self._registered = frozenset(decider.active_brokers) | frozenset(decider.fenced_brokers)
        return self._registered
