"""`make run`'s local stack keeps its quota store and history in a folder of its own (never a
real service's default data dir) and says where, with the report command for its history.
The whole stack on real Kafka: tests/integration/test_local_stack.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from app.settings import load_settings
from app.settings.model import Settings, env_name, property_name
from devtools.localstack import _banner, _local_environ

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = env_name(property_name("data_dir"))


def local_settings(config: Path | None = None) -> Settings:
    return load_settings(config, environ=_local_environ(config), kafka_admin_bootstrap_servers="127.0.0.1:9092")


def test_the_local_stack_keeps_its_data_in_a_folder_of_its_own_in_the_checkout(monkeypatch):
    monkeypatch.delenv(DATA_DIR, raising=False)
    settings = local_settings()
    assert Path(settings.data_dir) == ROOT / ".local-stack"
    assert settings.effective_history_dir == ROOT / ".local-stack" / "history"
    assert settings.data_dir != Settings.model_fields["data_dir"].default, "not a real service's default data dir"
    assert ".local-stack/" in (ROOT / ".gitignore").read_text().split()


def test_a_data_dir_configured_in_the_environment_or_the_properties_file_wins(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR, str(tmp_path / "from-env"))
    assert local_settings().data_dir == str(tmp_path / "from-env")
    monkeypatch.delenv(DATA_DIR)
    config = tmp_path / "throttle.properties"
    config.write_text(f"{property_name('data_dir')}={tmp_path / 'from-file'}\n")
    assert local_settings(config).data_dir == str(tmp_path / "from-file")


def test_the_banner_names_the_data_folder_and_the_report_command_for_its_history(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR, str(tmp_path / "data"))
    settings = local_settings()
    cluster = SimpleNamespace(
        broker_ids=[1], log_dir=lambda broker: tmp_path / f"broker-{broker}", bootstrap_servers="127.0.0.1:9092", base_dir=tmp_path
    )
    banner = _banner(cluster, "http://127.0.0.1:8080", "throttle-demo", settings)
    assert f"data (quota store, history; kept between runs): {tmp_path / 'data'}\n" in banner
    (line,) = [line for line in banner.splitlines() if "report on the history:" in line]
    command = line.split("report on the history: ", 1)[1].split()
    assert Path(command[0]).name == "throttle-report" and Path(command[0]).exists()
    assert command[1:] == ["--input", str(tmp_path / "data" / "history"), "--output", str(tmp_path / "data" / "report")]
