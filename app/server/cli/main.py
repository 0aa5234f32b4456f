"""``throttle-service``: run the HTTP service, or check a configuration, back up the quota
store or move it to Kafka, and exit."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path

from app.quotas.backup import backup
from app.quotas.store import QuotaStore, StoreRefused, store_file
from app.redaction import bounded, install_log_redaction
from app.server.runtime.log_format import configure_logging
from app.settings import ConfigurationError, Settings, load_settings
from app.settings.loading import prepare_directory
from app.settings.model import env_name, property_name

EXIT_INVALID_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="throttle-service",
        description="Serve Kafka throttle decisions computed from every broker's log dir volumes.",
        epilog="Environment variables override the file: a property's name upper-cased, dots as underscores.",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="Kafka-style properties file")
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="validate the configuration and exit (0 valid, 2 invalid)",
    )
    parser.add_argument(
        "--accept-empty-store",
        action="store_true",
        help="start on a SQLite quota store that came back empty or older than its last change, taking it as it is (once: it becomes the store to expect)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    migrate = commands.add_parser(
        "migrate-store",
        help="copy the SQLite store's overrides and groups into the Kafka-backed store (throttle.service.quota.store=kafka)",
    )
    migrate.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="Kafka-style properties file",
    )
    migrate.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="FILE",
        help="the SQLite file (default: quotas.sqlite3 in the data dir)",
    )
    backup_command = commands.add_parser(
        "backup",
        help="copy the SQLite quota store into FILE, also while the service runs; restore by copying FILE into its place",
    )
    backup_command.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="Kafka-style properties file",
    )
    backup_command.add_argument(
        "target", type=Path, metavar="FILE", help="the backup to write (replaced if it exists)"
    )
    return parser


def _invalid(exc: ConfigurationError) -> SystemExit:
    print(
        f"throttle-service: invalid configuration ({len(exc.problems)} problem(s)):",
        file=sys.stderr,
    )
    for problem in exc.problems:
        print(f"  {problem}", file=sys.stderr)
    return SystemExit(EXIT_INVALID_CONFIG)


def _load(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigurationError as exc:
        raise _invalid(exc) from None


def _bind(settings: Settings) -> socket.socket:
    """The HTTP socket, or exit 2 with one line naming the address and the settings that move it."""
    from app.server.edge.http_server import bind, listen_address

    try:
        return bind(settings.http_host, settings.http_port)
    except OSError as exc:
        address = listen_address(bounded(settings.http_host), settings.http_port)
        port, host = property_name("http_port"), property_name("http_host")
        print(
            f"throttle-service: cannot listen on {address} ({exc.strerror or exc}): choose another port with {port} "
            f"({env_name(port)}) or another address with {host} ({env_name(host)})",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_INVALID_CONFIG) from None


def _prepare_directories(settings: Settings) -> None:
    """Create the state directories now: one that cannot be written is a configuration
    error (exit 2), not a traceback from the first write."""
    try:
        prepare_directory("data_dir", Path(settings.data_dir))
        if settings.history_enabled and settings.observation_enabled:
            prepare_directory("history_dir", settings.effective_history_dir)
    except ConfigurationError as exc:
        raise _invalid(exc) from None


def _check_quota_store(settings: Settings, accept_loss: bool) -> None:
    """Open the SQLite store once before serving, so that a store that cannot be trusted stops
    start-up with one line here rather than in the app's lifespan, which uvicorn turns into
    exit 3 and a traceback. The lifespan opens it again, checked again."""
    if settings.quota_store != "sqlite":
        return
    try:
        store = QuotaStore(store_file(settings.data_dir), accept_loss=accept_loss)
    except StoreRefused as exc:
        print(f"throttle-service: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_INVALID_CONFIG) from None
    store.close()
    log = logging.getLogger("app.quotas")
    if store.accepted_loss is not None:
        log.warning("accepted as it is (--accept-empty-store): %s", store.accepted_loss)
    log.info(
        "quota store %s checked: %s (change %d)",
        store.path,
        store.generation.holding(),
        store.generation.number,
    )


def _backup(settings: Settings, target: Path) -> int:
    if settings.quota_store != "sqlite":
        print(
            "throttle-service backup: the quota store is the Kafka topic (throttle.service.quota.store=kafka), kept by Kafka's replicas: nothing to back up here",
            file=sys.stderr,
        )
        return EXIT_INVALID_CONFIG
    store = store_file(settings.data_dir)
    try:
        held = backup(store, target)
    except StoreRefused as exc:
        print(f"throttle-service backup: {exc}", file=sys.stderr)
        return EXIT_INVALID_CONFIG
    except OSError as exc:
        print(f"throttle-service backup: could not write {target}: {exc}", file=sys.stderr)
        return 1
    print(f"backed up {held.holding()} (change {held.number}) of {store} to {target}")
    return 0


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    settings = _load(args.config)
    if args.check_config:
        print("configuration is valid")
        return
    if args.command == "migrate-store":
        from app.server.cli.migrate import migrate_store

        raise SystemExit(migrate_store(settings, args.source))
    if args.command == "backup":
        raise SystemExit(_backup(settings, args.target))
    listener = _bind(settings)  # first: a port in use must leave the data dir untouched
    _prepare_directories(settings)
    # Before any logging: no library may write a configured secret to the log.
    install_log_redaction(settings.secret_values)
    configure_logging(settings.log_level, settings.log_format)
    if settings.log_level != "DEBUG":
        # kafka-python logs every failed attempt; failed rounds carry its latest error and
        # the service logs each change of state once.
        logging.getLogger("kafka").propagate = False
    _check_quota_store(settings, args.accept_empty_store)

    from app.server.app import create_app
    from app.server.edge.http_server import serve
    from app.server.runtime.garbage_collector import tune_garbage_collector

    app = create_app(settings)
    tune_garbage_collector()
    serve(app, settings, listener, on_stop=app.state.service.stopping)


if __name__ == "__main__":
    main()
