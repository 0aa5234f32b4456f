"""Run the service on a laptop: ``python -m devtools.localstack [--config FILE]`` (``make run``).

Without a configured cluster (no ``...kafka.admin.bootstrap.servers``) it brings up the same
topology as docker-compose.yml on loopback: a KRaft controller and three brokers from the
Apache Kafka jars (each broker's log dir on its own 64 MiB tmpfs when run as root, plain
directories with a warning otherwise), the broker shim built and installed on every broker,
and the service with demonstration limits. It prints the URLs and how to try it, and on
Ctrl-C (or SIGTERM) stops everything. Its quota store and history go to ``.local-stack/`` in
the checkout (unless a data dir is configured), never to a real service's default data dir,
so a report on a real service's history never mixes in demonstration rows. With a cluster
configured it only runs the service, exactly as ``throttle-service`` does."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from app.settings import ConfigurationError, Settings, load_settings
from app.settings.loading import configured_value
from app.settings.model import env_name, property_name
from devtools.devcluster.jars import repo_root

MiB = 1024 * 1024

# Demonstration settings of the local stacks (this one and docker-compose.yml, which a test
# keeps in step); anything the user configured wins.
LOCAL_DEFAULTS = {
    # Rounds every second: a 64 MiB volume filling at a few MiB/s crosses the ramp in tens of
    # seconds, and each round must see it on the way. The ramp is 40 MiB wide: a producer held to
    # quota x factor fills it at a rate that falls with the factor, 40 MiB / 4 MiB/s = 10 s per
    # factor of e, so THROTTLE lasts 30-40 s, several of Kafka's 11 s quota windows.
    "storage_check_interval": "PT1S",
    "throttle_factor_validity_duration": "PT1M",
    "storage_per_volume_limit_min_available_bytes": str(8 * MiB),
    "storage_per_volume_soft_limit_min_available_bytes": str(48 * MiB),
    # A base produce quota per broker, so that the soft-limit ramp slows producers down
    # (an unlimited quota stays unlimited until PAUSE).
    "produce": str(4 * MiB),
}


class _Stop(Exception):
    """SIGTERM before the HTTP server runs: unwind and stop the cluster."""


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1" if host in ("0.0.0.0", "") else host, port))
        except OSError:
            return True
    return False


def _fail(message: str) -> None:
    print(f"local stack: {message}", file=sys.stderr)
    raise SystemExit(2)


def local_data_dir() -> Path:
    """The local stack's own data folder (quota store, history), kept between runs."""
    return repo_root() / ".local-stack"


def _local_environ(config: Path | None = None) -> dict[str, str]:
    environ = {env_name(property_name(field)): value for field, value in LOCAL_DEFAULTS.items()}
    environ[env_name(property_name("http_host"))] = "127.0.0.1"
    if configured_value(config, "data_dir") is None:
        environ[env_name(property_name("data_dir"))] = str(local_data_dir())
    environ.update(os.environ)
    return environ


def _report_command(history: Path, output: Path) -> str:
    script = Path(sys.executable).with_name("throttle-report")
    command = str(script) if script.exists() else f"{sys.executable} -m spark.cli"
    return f"{command} --input {history} --output {output}"


def _banner(cluster, base: str, demo: str, settings: Settings) -> str:
    brokers = "".join(f"  broker {b}: log dir {cluster.log_dir(b)}\n" for b in cluster.broker_ids)
    data = Path(settings.data_dir)
    return (
        f"\nKafka: controller and {len(cluster.broker_ids)} brokers, bootstrap servers {cluster.bootstrap_servers}\n"
        f"{brokers}"
        f"  broker logs (the shim logs each new table there): {cluster.base_dir}/broker-<id>/server.log\n"
        f"\nservice: {base}  (API docs: {base}/docs)\n"
        f"  curl -s {base}/throttle-factor\n"
        f"  curl -s {base}/volumes\n"
        f"  curl -s '{base}/quotas/resolve?client-id=throttle-demo&type=produce'\n"
        f"  curl -s {base}/metrics | grep kafka_throttle\n"
        f"\nWatch it protect the cluster (fills broker 1's volume, then frees it):\n"
        f"  {demo}\n"
        f"\ndata (quota store, history; kept between runs): {data}\n"
        f"  report on the history: {_report_command(settings.effective_history_dir, data / 'report')}\n"
        "\nCtrl-C stops the service, the brokers and the controller.\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devtools.localstack", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, metavar="FILE")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=64, help="capacity of each broker's log dir volume")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)

    from app.server.cli.main import main as service_main

    service_args = ["--config", str(args.config)] if args.config else []
    if (configured_value(args.config, "kafka_admin_bootstrap_servers") or "").strip():
        service_main(service_args)
        return

    # The service's settings first: a bad configuration or a busy port should not cost a
    # cluster start.
    environ = _local_environ(args.config)
    try:
        settings = load_settings(args.config, environ=environ, kafka_admin_bootstrap_servers="127.0.0.1:9092")
    except ConfigurationError as exc:
        _fail("invalid configuration:\n" + "\n".join(f"  {problem}" for problem in exc.problems))
    if settings.http_ssl_certfile:
        _fail("the local stack's brokers poll the service over plain HTTP; unset throttle.service.http.ssl.* for it")
    if _port_in_use(settings.http_host, settings.http_port):
        _fail(f"port {settings.http_port} is in use; choose another with THROTTLE_SERVICE_HTTP_PORT=<port>")
    if os.geteuid() != 0:
        print(
            "warning: not running as root, so the brokers' log dirs are plain directories on your disk, not "
            "small tmpfs volumes: the service sees that file system's size, and the demo cannot fill it.",
            file=sys.stderr,
        )

    from devtools.devcluster import LocalKafkaCluster
    from devtools.devcluster.shim import build_shim, shim_broker_config

    def on_sigterm(signum, frame):  # until uvicorn installs its own handler
        raise _Stop()

    signal.signal(signal.SIGTERM, on_sigterm)
    base = f"http://127.0.0.1:{settings.http_port}"
    cluster = None
    try:
        print("building the broker shim (Maven) ...", flush=True)
        jar = build_shim()
        cluster = LocalKafkaCluster(
            brokers=args.brokers,
            log_dir_size_mib=args.size_mib,
            extra_classpath=[jar],
            broker_config=shim_broker_config(base),
        )
        print(f"starting Kafka: a controller and {args.brokers} brokers, {args.size_mib} MiB log dir each ...", flush=True)
        cluster.start()
        environ[env_name(property_name("kafka_admin_bootstrap_servers"))] = cluster.bootstrap_servers
        os.environ.update(environ)
        demo = f"{sys.executable} -m devtools.demo --bootstrap-servers {cluster.bootstrap_servers} --service {base}"
        print(_banner(cluster, base, demo, settings), flush=True)
        service_main(service_args)
    except (KeyboardInterrupt, _Stop):
        pass
    except RuntimeError as exc:  # the shim build or a node that would not start
        print(f"local stack: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if cluster is not None:
            print("stopping the brokers and the controller ...", flush=True)
            cluster.stop()
            print("stopped.", flush=True)


if __name__ == "__main__":
    main()
