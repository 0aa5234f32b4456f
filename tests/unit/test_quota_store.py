"""The SQLite quota store's generation, its checks at opening and its backup, in-process (the
real command on broken stores: tests/integration/test_quota_store_checks.py)."""

from __future__ import annotations

import logging
import shutil
import sqlite3

import pytest

from app.quotas.backup import backup
from app.quotas.generation import Generation, generation_path, read_generation
from app.quotas.model import QuotaEntity, QuotaGroup, QuotaType
from app.quotas.store import SCHEMA_VERSION, QuotaStore, StoreRefused, wal_file

ALICE = QuotaEntity("alice", None)
SCHEMA_1 = """
CREATE TABLE overrides (user_kind TEXT NOT NULL, user_name TEXT NOT NULL, client_kind TEXT NOT NULL, client_name TEXT NOT NULL,
    limits TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (user_kind, user_name, client_kind, client_name));
CREATE TABLE quota_groups (name TEXT PRIMARY KEY, users TEXT NOT NULL, client_ids TEXT NOT NULL, limits TEXT NOT NULL, updated_at REAL NOT NULL);
INSERT INTO overrides VALUES ('name', 'alice', 'none', '', '{"produce": 5.0}', 0);
PRAGMA user_version = 1;
"""


def test_every_change_is_counted_in_the_database_and_recorded_beside_it(tmp_path):
    path = tmp_path / "quotas.sqlite3"
    store = QuotaStore(path)
    assert store.generation == Generation(0, 0, 0) and read_generation(generation_path(path)) == Generation(0, 0, 0)
    store.put_override(ALICE, {QuotaType.PRODUCE: 5.0}, 0)
    store.put_group(QuotaGroup("g", frozenset({"bob"}), frozenset(), {QuotaType.FETCH: 7.0}), 0)
    assert read_generation(generation_path(path)) == Generation(2, 1, 1)
    store.delete_override(ALICE)
    store.delete_group("g")
    assert read_generation(generation_path(path)) == Generation(4, 0, 0) == store.generation
    store.close()
    assert QuotaStore(path).generation == Generation(4, 0, 0)


def test_a_store_of_schema_1_is_upgraded_with_its_rows(tmp_path):
    path = tmp_path / "quotas.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1)
    db.close()
    store = QuotaStore(path)
    assert store.load_overrides() == {ALICE: {QuotaType.PRODUCE: 5.0}}
    assert store.generation == Generation(0, 1, 0) == read_generation(generation_path(path))
    store.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_an_older_copy_is_refused_until_accepted_and_an_even_older_one_after_that(tmp_path):
    path = tmp_path / "quotas.sqlite3"
    store = QuotaStore(path)
    store.close()
    oldest = tmp_path / "oldest.sqlite3"
    shutil.copy(path, oldest)
    store = QuotaStore(path)
    store.put_override(ALICE, {QuotaType.PRODUCE: 5.0}, 0)
    store.close()
    older = tmp_path / "older.sqlite3"
    shutil.copy(path, older)
    store = QuotaStore(path)
    store.put_override(ALICE, {QuotaType.PRODUCE: 6.0}, 0)
    store.close()

    shutil.copy(older, path)
    with pytest.raises(StoreRefused, match="holds 1 overrides and 0 groups \\(change 1\\), but quotas.sqlite3.generation .* at change 2"):
        QuotaStore(path)
    accepted = QuotaStore(path, accept_loss=True)
    assert "came back older" in (accepted.accepted_loss or "")
    assert accepted.generation.number == 3 and accepted.load_overrides() == {ALICE: {QuotaType.PRODUCE: 5.0}}
    accepted.close()
    QuotaStore(path).close()  # accepted once: expected from now on

    shutil.copy(oldest, path)
    with pytest.raises(StoreRefused, match="came back older"):
        QuotaStore(path)


def test_a_store_that_held_nothing_may_come_back_empty(tmp_path):
    """Nothing was lost: an empty store where an empty one was recorded starts as it is."""
    path = tmp_path / "quotas.sqlite3"
    store = QuotaStore(path)
    store.put_override(ALICE, {QuotaType.PRODUCE: 5.0}, 0)
    store.delete_override(ALICE)
    store.close()
    path.unlink()
    store = QuotaStore(path)
    assert store.accepted_loss is None and store.load_overrides() == {}
    store.close()
    path.write_bytes(b"")
    QuotaStore(path).close()


def test_an_unreadable_generation_file_leaves_the_check_to_the_mark_of_use(tmp_path, caplog):
    """It is written without a sync, so a power cut may leave it torn; the store is then
    judged as one without it, and the file written again."""
    path = tmp_path / "quotas.sqlite3"
    store = QuotaStore(path)
    store.put_override(ALICE, {QuotaType.PRODUCE: 5.0}, 0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(path, elsewhere / path.name)  # while open, without its -wal file
    store.close()
    for directory in (tmp_path, elsewhere):
        generation_path(directory / path.name).write_text('{"generation": -1}')
    with caplog.at_level(logging.WARNING, logger="app.quotas"):
        QuotaStore(path).close()
    assert "quotas.sqlite3.generation cannot be read" in caplog.text
    assert read_generation(generation_path(path)) == Generation(1, 1, 0)
    with pytest.raises(StoreRefused, match="copied without its -wal file"):
        QuotaStore(elsewhere / path.name)


def test_a_generation_that_cannot_be_recorded_fails_no_change_and_is_logged_once(tmp_path, caplog):
    path = tmp_path / "quotas.sqlite3"
    store = QuotaStore(path)
    generation_path(path).unlink()
    generation_path(path).mkdir()  # nothing can be renamed onto it
    with caplog.at_level(logging.WARNING, logger="app.quotas"):
        store.put_override(ALICE, {QuotaType.PRODUCE: 5.0}, 0)
        store.put_override(ALICE, {QuotaType.PRODUCE: 6.0}, 0)
        generation_path(path).rmdir()
        store.put_override(ALICE, {QuotaType.PRODUCE: 7.0}, 0)
    assert [r.getMessage().split(" in ")[0] for r in caplog.records] == [
        "could not record the quota store's generation",
        "recording the quota store's generation",
    ]
    assert store.load_overrides() == {ALICE: {QuotaType.PRODUCE: 7.0}}
    assert read_generation(generation_path(path)) == Generation(3, 1, 0)
    store.close()


def test_a_file_copied_without_its_wal_while_open_is_refused_where_no_generation_file_is(tmp_path):
    path = tmp_path / "quotas.sqlite3"
    store = QuotaStore(path)
    store.put_override(ALICE, {QuotaType.PRODUCE: 5.0}, 0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(path, elsewhere / path.name)  # the change is in the -wal file only
    store.close()
    with pytest.raises(StoreRefused, match="copied without its -wal file while a service had it open"):
        QuotaStore(elsewhere / path.name)
    # Closed, the file alone is the whole store, and says so.
    shutil.copy(path, elsewhere / path.name)
    store = QuotaStore(elsewhere / path.name)
    assert store.load_overrides() == {ALICE: {QuotaType.PRODUCE: 5.0}}
    store.close()


def test_a_backup_is_one_self_contained_file_that_opens_anywhere(tmp_path):
    path = tmp_path / "quotas.sqlite3"
    store = QuotaStore(path)
    store.put_override(ALICE, {QuotaType.PRODUCE: 5.0}, 0)
    target = tmp_path / "backups" / "quotas-1.sqlite3"
    target.parent.mkdir()
    assert backup(path, target) == Generation(1, 1, 0)  # taken while the store is open
    store.close()
    assert sorted(p.name for p in target.parent.iterdir()) == ["quotas-1.sqlite3"]
    assert sqlite3.connect(target).execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    elsewhere = tmp_path / "elsewhere" / "quotas.sqlite3"
    elsewhere.parent.mkdir()
    shutil.copy(target, elsewhere)
    restored = QuotaStore(elsewhere)
    assert restored.accepted_loss is None and restored.load_overrides() == {ALICE: {QuotaType.PRODUCE: 5.0}}
    restored.close()


def test_a_backup_needs_a_store_and_a_directory_to_write_into(tmp_path):
    with pytest.raises(StoreRefused, match="does not exist"):
        backup(tmp_path / "quotas.sqlite3", tmp_path / "backup.sqlite3")
    QuotaStore(tmp_path / "quotas.sqlite3").close()
    with pytest.raises(OSError, match="is not a directory"):
        backup(tmp_path / "quotas.sqlite3", tmp_path / "no-such-dir" / "backup.sqlite3")
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(b"not a database!!" + bytes(4080))
    with pytest.raises(StoreRefused, match="is damaged"):
        backup(damaged, tmp_path / "backup.sqlite3")
    assert not (tmp_path / "backup.sqlite3").exists() and not (tmp_path / ".backup.sqlite3.partial").exists()


def test_a_backup_put_in_place_beside_the_replaced_stores_wal_is_refused_not_mixed_with_it(tmp_path):
    """SQLite would apply the -wal file a killed store left behind to the restored copy."""
    path = tmp_path / "quotas.sqlite3"
    store = QuotaStore(path)
    store.put_override(ALICE, {QuotaType.PRODUCE: 5.0}, 0)
    backup(path, tmp_path / "backup.sqlite3")
    store.put_override(QuotaEntity("bob", None), {QuotaType.PRODUCE: 6.0}, 0)
    left_behind = wal_file(path).read_bytes()  # as after kill -9
    store.close()
    shutil.copy(tmp_path / "backup.sqlite3", path)
    wal_file(path).write_bytes(left_behind)
    for accept_loss in (False, True):
        with pytest.raises(StoreRefused, match="quotas.sqlite3-wal beside it belongs to the store it replaced: delete quotas.sqlite3-wal"):
            QuotaStore(path, accept_loss=accept_loss)
    wal_file(path).unlink()
    restored = QuotaStore(path, accept_loss=True)  # older than the store it replaced, on purpose
    assert restored.load_overrides() == {ALICE: {QuotaType.PRODUCE: 5.0}}
    restored.close()
