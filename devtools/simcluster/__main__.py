"""``python -m devtools.simcluster --brokers 1000 --log-dirs 12``: runs a simulated cluster until
its standard input ends. Prints one JSON line with the bootstrap servers and every broker's
port, then answers each JSON line read ({"call": "fence", "args": [3]}) with one JSON line
({"result": ...} or {"error": ...})."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .cluster import SimulatedCluster
from .process import CONTROLS
from .state import MiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--log-dirs", type=int, default=1, help="log dirs per broker")
    parser.add_argument("--total-bytes", type=int, default=64 * MiB, help="each log dir's volume size")
    parser.add_argument("--usable-bytes", type=int, default=None, help="each volume's free bytes (default: all)")
    args = parser.parse_args()
    cluster = SimulatedCluster(args.brokers, args.log_dirs, args.total_bytes, args.usable_bytes).start()
    try:
        print(json.dumps({"bootstrap_servers": cluster.bootstrap_servers, "ports": {b: cluster.broker_port(b) for b in cluster.broker_ids}}), flush=True)
        for line in sys.stdin:
            print(json.dumps(_answer(cluster, line)), flush=True)
    finally:
        cluster.stop()
    return 0


def _answer(cluster: SimulatedCluster, line: str) -> dict[str, Any]:
    try:
        request = json.loads(line)
        if request.get("call") not in CONTROLS:
            return {"error": f"unknown call {request.get('call')!r}; one of {', '.join(CONTROLS)}"}
        return {"result": getattr(cluster, request["call"])(*request.get("args", ()), **request.get("kwargs", {}))}
    except Exception as exc:  # the driver reads the error and decides
        return {"error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    sys.exit(main())
