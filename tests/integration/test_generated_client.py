"""A client generated from the committed openapi/openapi.json works against the running service."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from devtools.commands import run_command

from .conftest import ROOT

TOKEN = "generated-client-admin-token"


def generate_client(tmp_path: Path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    run_command(
        [Path(sys.executable).parent / "openapi-python-client", "generate", "--path", ROOT / "openapi" / "openapi.json",
         "--meta", "none", "--output-path", tmp_path / "throttle_client"],
        120, check=True, env=env,
    )
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    return importlib.import_module("throttle_client")


def test_generated_client_reads_resolves_creates_and_deletes(start_service, tmp_path):
    package = generate_client(tmp_path)
    from throttle_client.api.quotas import delete_override, put_override, quota_table, resolve_quota
    from throttle_client.api.throttle import throttle_factor
    from throttle_client.models import QuotaLimits, ResolveQuotaType

    service = start_service(
        storage_check_interval="PT0S",
        storage_per_volume_limit_min_available_ratio="0.05",
        admin_token=TOKEN,
        produce="1000000",
    )
    client = package.Client(base_url=service.base_url)
    admin = package.AuthenticatedClient(base_url=service.base_url, token=TOKEN)

    table = quota_table.sync(client=client)
    assert table.defaults.produce == 1000000 and table.factor == 1.0
    assert throttle_factor.sync(client=client).state == "OPEN"

    created = put_override.sync(client=admin, user="alice", client_id="<default>", body=QuotaLimits(produce=250000.0))
    assert created.level == "user, default client-id"
    resolved = resolve_quota.sync(client=client, user="alice", client_id="billing", type_=ResolveQuotaType.PRODUCE)
    assert (resolved.level, resolved.limit) == ("user, default client-id", 250000.0)
    assert resolved.tags.additional_properties == {"user": "alice", "client-id": "billing"}

    assert delete_override.sync_detailed(client=admin, user="alice", client_id="<default>").status_code == 204
    assert quota_table.sync(client=client).overrides == []
    refused = put_override.sync_detailed(client=client, user="bob", body=QuotaLimits(produce=1.0))
    assert refused.status_code == 401
