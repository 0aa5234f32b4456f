"""``throttle-service migrate-store``: copy the quota overrides and groups (and the enforcement set with the API) of this replica's
SQLite store into the Kafka-backed store, once, when moving a deployment to several replicas.

Run it with the settings of the new deployment (``throttle.service.quota.store=kafka``); it
reads the SQLite file of the data dir (or ``--from FILE``), waits until the topic has been
read, writes every override and group (a change the topic already holds is written again,
harmlessly) and says what it copied. The SQLite file is left as it was."""

from __future__ import annotations

import sys
from pathlib import Path

from app.kafka.admin_config import to_librdkafka
from app.quotas.kafka_store import ChangeRefused, KafkaQuotaStore, StoreUnavailable
from app.quotas.store import QuotaStore, StoreRefused, store_file
from app.settings import Settings

LOAD_TIMEOUT_SECONDS = 60.0


def migrate_store(settings: Settings, source: Path | None) -> int:
    if settings.quota_store != "kafka":
        print(
            "throttle-service migrate-store: set throttle.service.quota.store=kafka (the store to copy into)",
            file=sys.stderr,
        )
        return 2
    path = source or store_file(settings.data_dir)
    if not path.is_file():
        print(
            f"throttle-service migrate-store: {path} does not exist: nothing to copy (--from FILE names another)",
            file=sys.stderr,
        )
        return 2
    try:
        sqlite = QuotaStore(path)
    except StoreRefused as exc:
        print(f"throttle-service migrate-store: {exc}", file=sys.stderr)
        return 2
    overrides, groups, enforcement = (
        sqlite.load_overrides(),
        sqlite.load_groups(),
        sqlite.load_enforcement(),
    )
    sqlite.close()
    assert settings.kafka_admin_bootstrap_servers is not None
    kafka = KafkaQuotaStore(
        settings.quota_store_topic,
        to_librdkafka(settings.kafka_admin, settings.kafka_admin_bootstrap_servers),
    )
    kafka.start()
    try:
        if not kafka.wait_loaded(LOAD_TIMEOUT_SECONDS):
            print(
                f"throttle-service migrate-store: could not read {settings.quota_store_topic!r}: {kafka.error}",
                file=sys.stderr,
            )
            return 1
        refused = []
        for entity, values in overrides.items():
            kafka.put_override(entity, values, 0.0)
        for group in groups.values():
            try:
                kafka.put_group(group, 0.0)
            except ChangeRefused as exc:
                refused.append(f"group {group.name!r}: {exc}")
        if (
            enforcement is not None
        ):  # set with PUT /enforcement: it goes on winning over the settings
            kafka.put_enforcement(enforcement, 0.0)
    except StoreUnavailable as exc:
        print(f"throttle-service migrate-store: {exc}", file=sys.stderr)
        return 1
    finally:
        kafka.close()
    copied_enforcement = (
        "" if enforcement is None else f" and the enforcement ({enforcement.describe()})"
    )
    print(
        f"copied {len(overrides)} overrides and {len(groups) - len(refused)} groups{copied_enforcement} from {path} "
        f"into {settings.quota_store_topic!r}"
    )
    for line in refused:
        print(f"  not copied: {line}", file=sys.stderr)
    return 1 if refused else 0
