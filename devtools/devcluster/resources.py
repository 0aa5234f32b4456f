"""What a running process holds, read from /proc: threads, open file descriptors, resident
memory and CPU time. Used by the tests and benchmarks that watch the service for leaks."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ProcessResources:
    threads: int
    open_files: int
    rss_kib: int
    cpu_seconds: float

    def __str__(self) -> str:
        return f"{self.threads} threads, {self.open_files} open files, {self.rss_kib / 1024:.1f} MiB RSS, {self.cpu_seconds:.1f} s CPU"


def process_resources(pid: int) -> ProcessResources:
    status = {
        name: value.split()[0]
        for name, _, value in (line.partition(":") for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        if name in ("Threads", "VmRSS")
    }
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return ProcessResources(
        threads=int(status["Threads"]),
        open_files=len(os.listdir(f"/proc/{pid}/fd")),
        rss_kib=int(status["VmRSS"]),
        cpu_seconds=(int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"),
    )
