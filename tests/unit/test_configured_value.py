"""`make run` decides between the whole local stack and the service alone by whether bootstrap
servers are configured, before (and whatever) the rest of the configuration says."""

from app.settings.loading import configured_value


def test_bootstrap_servers_from_the_file_the_environment_or_nowhere(tmp_path):
    config = tmp_path / "throttle.properties"
    config.write_text("client.quota.callback.static.kafka.admin.bootstrap.servers=kafka-0:9092\n"
                      "client.quota.callback.static.storage.per.volume.limit.min.available.bytes=not-a-number\n")
    field = "kafka_admin_bootstrap_servers"
    assert configured_value(config, field, environ={}) == "kafka-0:9092"
    env = {"CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS": "kafka-1:9092"}
    assert configured_value(config, field, environ=env) == "kafka-1:9092"
    assert configured_value(None, field, environ={}) is None
    assert configured_value(tmp_path / "missing.properties", field, environ={}) is None
    # other settings conflicting or invalid do not hide the answer
    both = {**env, "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_RATIO": "0.05"}
    assert configured_value(config, field, environ=both) == "kafka-1:9092"


def test_a_started_service_sees_none_of_the_callers_settings():
    from app.settings.loading import environ_without_settings

    environ = {
        "PATH": "/usr/bin",
        "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS": "kafka-0:9092",
        "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SASL_JAAS_CONFIG": "x",
        "THROTTLE_SERVICE_HTTP_PORT": "9000",
    }
    assert environ_without_settings(environ) == {"PATH": "/usr/bin"}
