"""What a running process holds, read from /proc: threads, open file descriptors, resident
memory, CPU time and established TCP connections. Used by the tests and benchmarks that watch
the service for leaks and measure its cost."""

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
    peak_rss_kib: int  # the most resident memory so far (VmHWM)

    def __str__(self) -> str:
        return f"{self.threads} threads, {self.open_files} open files, {self.rss_kib / 1024:.1f} MiB RSS, {self.cpu_seconds:.1f} s CPU"


def process_resources(pid: int) -> ProcessResources:
    status = {
        name: value.split()[0]
        for name, _, value in (line.partition(":") for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        if name in ("Threads", "VmRSS", "VmHWM")
    }
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return ProcessResources(
        threads=int(status["Threads"]),
        open_files=len(os.listdir(f"/proc/{pid}/fd")),
        rss_kib=int(status["VmRSS"]),
        cpu_seconds=(int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"),
        peak_rss_kib=int(status["VmHWM"]),
    )


def established_connections(pid: int) -> int:
    """TCP connections of the process in state ESTABLISHED (IPv4 and IPv6)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    established = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "01" and fields[9] in inodes:  # st 01: ESTABLISHED
                established += 1
    return established
