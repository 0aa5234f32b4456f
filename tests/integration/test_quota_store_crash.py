"""Every acknowledged quota change survives kill -9 of the service, and the store reopens cleanly."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx

from app.quotas.model import QuotaType
from app.quotas.store import QuotaStore

TOKEN = "crash-test-admin-token"
NO_KAFKA = {"storage_check_interval": "PT0S", "storage_per_volume_limit_min_available_ratio": "0.05", "admin_token": TOKEN}


def test_acknowledged_writes_survive_sigkill(start_service, tmp_path):
    data_dir = str(tmp_path / "state")
    service = start_service(**NO_KAFKA, data_dir=data_dir)
    acknowledged: dict[str, float] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(worker: int) -> None:
        client = httpx.Client(base_url=service.base_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
        n = 0
        while not stop.is_set():
            user, value = f"user-{worker}-{n}", float(1_000_000 + n)
            try:
                response = client.put("/quotas/overrides", params={"user": user}, json={"produce": value})
            except httpx.HTTPError:
                break  # the service is gone: this write was never acknowledged
            if response.status_code == 200:
                with lock:
                    acknowledged[user] = value
            n += 1
        client.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(2.0)
    os.kill(service.process.pid, signal.SIGKILL)  # mid-burst: requests are in flight
    service.process.wait(10)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert len(acknowledged) > 20, "the burst was too short to prove anything"

    # The store opens cleanly, and holds every acknowledged write.
    store = QuotaStore(tmp_path / "state" / "quotas.sqlite3")
    try:
        assert store.integrity_ok()
        stored = {e.user: limits[QuotaType.PRODUCE] for e, limits in store.load_overrides().items() if isinstance(e.user, str)}
    finally:
        store.close()
    missing = {user for user in acknowledged if stored.get(user) != acknowledged[user]}
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {sorted(missing)[:3]}"

    # And the restarted service serves them.
    restarted = start_service(**NO_KAFKA, data_dir=data_dir)
    table = restarted.client.get("/quotas").json()
    served = {o["entity"]["user"]: o["limits"]["produce"] for o in table["overrides"]}
    assert all(served.get(user) == value for user, value in acknowledged.items())
