"""``throttle-service``: run the HTTP service, or check a configuration and exit."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from app.redaction import install_log_redaction
from app.settings import ConfigurationError, Settings, load_settings
from app.settings.loading import prepare_directory

EXIT_INVALID_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="throttle-service",
        description="Serve Kafka throttle decisions computed from every broker's log dir volumes.",
        epilog="Environment variables override the file: a property's name upper-cased, dots as underscores.",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="Kafka-style properties file")
    parser.add_argument("--check-config", action="store_true", help="validate the configuration and exit (0 valid, 2 invalid)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    migrate = commands.add_parser(
        "migrate-store", help="copy the SQLite store's overrides and groups into the Kafka-backed store (throttle.service.quota.store=kafka)"
    )
    migrate.add_argument("--config", type=Path, metavar="FILE", default=argparse.SUPPRESS, help="Kafka-style properties file")
    migrate.add_argument("--from", dest="source", type=Path, metavar="FILE", help="the SQLite file (default: quotas.sqlite3 in the data dir)")
    return parser


def _invalid(exc: ConfigurationError) -> SystemExit:
    print(f"throttle-service: invalid configuration ({len(exc.problems)} problem(s)):", file=sys.stderr)
    for problem in exc.problems:
        print(f"  {problem}", file=sys.stderr)
    return SystemExit(EXIT_INVALID_CONFIG)


def _load(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigurationError as exc:
        raise _invalid(exc) from None


def _prepare_directories(settings: Settings) -> None:
    """Create the state directories now: one that cannot be written is a configuration
    error (exit 2), not a traceback from the first write."""
    try:
        prepare_directory("data_dir", Path(settings.data_dir))
        if settings.history_enabled and settings.observation_enabled:
            prepare_directory("history_dir", settings.effective_history_dir)
    except ConfigurationError as exc:
        raise _invalid(exc) from None


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    settings = _load(args.config)
    if args.check_config:
        print("configuration is valid")
        return
    if args.command == "migrate-store":
        from app.server.migrate import migrate_store

        raise SystemExit(migrate_store(settings, args.source))
    _prepare_directories(settings)
    # Before any logging: no library may write a configured secret to the log.
    install_log_redaction(settings.secret_values)
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.log_level != "DEBUG":
        # kafka-python logs every failed attempt; failed rounds carry its latest error and
        # the service logs each change of state once.
        logging.getLogger("kafka").propagate = False

    import uvicorn

    from app.server.app import create_app
    from app.server.garbage_collector import tune_garbage_collector

    app = create_app(settings)
    tune_garbage_collector()
    uvicorn.run(
        app,
        host=settings.http_host,
        port=settings.http_port,
        ssl_certfile=settings.http_ssl_certfile,
        ssl_keyfile=settings.http_ssl_keyfile,
        log_level=settings.log_level.lower(),
        access_log=False,
    )


if __name__ == "__main__":
    main()
