"""Apache Kafka's Java Admin client as a CreateTopics probe (java/MutationProbe.java), one JVM
per test module. It speaks CreateTopics v6+, the versions whose controller-mutation quota is
strict (KIP-599), so a mutation over the quota is refused with THROTTLING_QUOTA_EXCEEDED.
librdkafka (confluent-kafka) sends CreateTopics v4 at most, for which Kafka applies the quota
permissively: the topics are created and the answer only carries a throttle time."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from devtools.devcluster import ensure_kafka_jars

SOURCE = Path(__file__).parent / "java" / "MutationProbe.java"


class MutationProbe:
    def __init__(self, bootstrap: str) -> None:
        self._process = subprocess.Popen(
            ["java", "-cp", f"{ensure_kafka_jars()}/*", str(SOURCE), bootstrap],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
        )

    def create(self, *topics: str, retry_ms: int = 0, deadline: float = 120) -> dict[str, list[str]]:
        """One CreateTopics of one-partition topics from a new Admin client, without retrying on
        quota violations unless ``retry_ms`` (then retrying, as by default, within that API
        timeout): topic -> ["CREATED"], ["THROTTLING_QUOTA_EXCEEDED", "<ms>"] or ["FAILED", ...].
        A probe that has not answered within ``deadline`` seconds is killed and the test fails."""
        assert self._process.stdin is not None and self._process.stdout is not None
        retry = f"true {retry_ms}" if retry_ms else "false 15000"
        self._process.stdin.write(f"{retry} {' '.join(topics)}\n")
        self._process.stdin.flush()
        watchdog = threading.Timer(deadline, self._process.kill)
        watchdog.start()
        try:
            answers = {}
            while (line := self._process.stdout.readline().strip()) != "END":
                assert line, f"the probe exited or gave no answer within {deadline} s"
                topic, answer = line.split(" ", 1)
                answers[topic] = answer.split(" ")
        finally:
            watchdog.cancel()
        assert set(answers) == set(topics), answers
        return answers

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
