"""``python -m devtools.devcluster [--brokers N] [--size-mib M]``

Starts a local KRaft cluster (one controller + N brokers, each broker's log dir
on its own M MiB tmpfs), prints the bootstrap servers and log dirs, and blocks
until Ctrl-C / SIGTERM, then stops everything (processes, mounts, temp dir).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from .cluster import LocalKafkaCluster
from .jars import KAFKA_VERSION


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devtools.devcluster", description=__doc__.split("\n\n")[1])
    ap.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    ap.add_argument("--size-mib", type=int, default=64, help="tmpfs size of each broker's log dir (default 64)")
    ap.add_argument("--base-dir", type=Path, default=None, help="working directory (default: a new temp dir, removed at exit)")
    ap.add_argument("--no-tmpfs", action="store_true", help="plain directories instead of tmpfs mounts")
    ap.add_argument("--controllers", type=int, default=1, help="controller-only quorum voters (default 1)")
    ap.add_argument(
        "--metadata-size-mib", type=int, default=None,
        help="put every node's metadata log dir on its own tmpfs of this size (default: plain directory)",
    )
    ap.add_argument("--heap", default="384m", help="JVM heap per node (default 384m)")
    ap.add_argument("--version", default=KAFKA_VERSION, help=f"Kafka version (default {KAFKA_VERSION})")
    ap.add_argument(
        "-c", "--broker-config", action="append", default=[], metavar="KEY=VALUE",
        help="extra broker server.properties entry (repeatable)",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    broker_config = {}
    for item in args.broker_config:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--broker-config expects KEY=VALUE, got {item!r}")
        broker_config[key.strip()] = value.strip()

    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    cluster = LocalKafkaCluster(
        base_dir=args.base_dir,
        brokers=args.brokers,
        log_dir_size_mib=args.size_mib,
        tmpfs=False if args.no_tmpfs else None,
        broker_config=broker_config,
        controllers=args.controllers,
        metadata_tmpfs_mib=args.metadata_size_mib,
        heap=args.heap,
        version=args.version,
    )
    try:
        cluster.start()
        print(f"bootstrap servers: {cluster.bootstrap_servers}")
        print(f"controller:        127.0.0.1:{cluster.controller_port} (node {cluster.controller_id})")
        if len(cluster.controller_ids) > 1:
            print(f"controllers:       {cluster.bootstrap_controllers} (nodes {cluster.controller_ids})")
        for bid in cluster.broker_ids:
            print(
                f"broker {bid}: 127.0.0.1:{cluster.broker_port(bid)}  log dir {cluster.log_dir(bid)}  "
                f"log {cluster.server_log(bid)}"
            )
        print("Ctrl-C or SIGTERM to stop.", flush=True)
        while not stop.wait(1.0):
            dead = [nid for nid in [cluster.controller_id, *cluster.broker_ids] if not cluster.is_running(nid)]
            if dead:
                print(f"node(s) {dead} exited unexpectedly; see their server.log", file=sys.stderr)
                return 1
        return 0
    except Exception as exc:  # noqa: BLE001
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        # Ignore further signals while tearing down so a second Ctrl-C can't
        # leave mounts behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("stopping...", flush=True)
        cluster.stop()
        print("stopped.", flush=True)


if __name__ == "__main__":
    sys.exit(main())
