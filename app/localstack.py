"""Run the service on a laptop: ``python -m app.localstack [--config FILE]``.

Without a configured cluster (no ``...kafka.admin.bootstrap.servers``) it first starts a
local 3-broker KRaft cluster from the Apache Kafka jars (each broker's log dir on its own
64 MiB tmpfs when run as root, plain directories otherwise), points the service at it with
demonstration limits, and stops everything on Ctrl-C. With a cluster configured it only
runs the service, exactly as ``throttle-service`` does."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from app.settings import ConfigurationError, load_settings
from app.settings.model import env_name, property_name

MiB = 1024 * 1024

# Demonstration settings for the local cluster; anything the user configured wins.
LOCAL_DEFAULTS = {
    "storage_check_interval": "PT5S",
    "throttle_factor_validity_duration": "PT1M",
    "storage_per_volume_limit_min_available_bytes": str(8 * MiB),
    "storage_per_volume_soft_limit_min_available_bytes": str(24 * MiB),
    "http_host": "127.0.0.1",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app.localstack", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, metavar="FILE")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=64, help="capacity of each broker's log dir volume")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)

    from app.cli import main as service_main

    probe_env = dict(os.environ)
    try:
        configured = load_settings(args.config, environ=probe_env, storage_check_interval="PT0S",
                                   storage_per_volume_limit_min_available_bytes="0").kafka_admin_bootstrap_servers
    except ConfigurationError:
        configured = None  # the service reports the problems itself below
    if configured:
        service_main(["--config", str(args.config)] if args.config else [])
        return

    from app.devcluster import LocalKafkaCluster

    cluster = LocalKafkaCluster(brokers=args.brokers, log_dir_size_mib=args.size_mib)
    try:
        print(f"starting a local Kafka cluster: {args.brokers} brokers, {args.size_mib} MiB log dir each ...", flush=True)
        cluster.start()
        environ = {env_name(property_name(field)): value for field, value in LOCAL_DEFAULTS.items()}
        environ.update(os.environ)
        environ[env_name(property_name("kafka_admin_bootstrap_servers"))] = cluster.bootstrap_servers
        os.environ.update(environ)
        settings = load_settings(args.config)
        base = f"http://{settings.http_host}:{settings.http_port}"
        print(
            f"\nKafka bootstrap servers: {cluster.bootstrap_servers}\n"
            + "".join(f"  broker {b}: log dir {cluster.log_dir(b)}\n" for b in cluster.broker_ids)
            + f"\nservice: {base}\n"
            f"  curl -s {base}/throttle-factor | python3 -m json.tool\n"
            f"  curl -s {base}/volumes | python3 -m json.tool\n"
            f"  curl -s {base}/metrics | grep kafka_throttle\n"
            "Ctrl-C stops the service and the cluster.\n",
            flush=True,
        )
        service_main(["--config", str(args.config)] if args.config else [])
    except ConfigurationError as exc:
        print(f"invalid configuration:\n{exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping the local cluster ...", flush=True)
        cluster.stop()


if __name__ == "__main__":
    main()
