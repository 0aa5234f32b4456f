"""A real multi-broker Apache Kafka KRaft cluster on loopback, for tests.

Topology: one dedicated KRaft controller (node id 1000, metadata on a plain
directory) plus N broker-only nodes (ids 1..N). Every broker's ``log.dirs`` is a
single directory on its own tmpfs mount of ``log_dir_size_mib`` MiB, so
DescribeLogDirs reports ``TotalBytes`` equal to the mount size. Because the
controller is separate, stopping/killing/restarting brokers never loses the
quorum.

Layout of ``base_dir``::

    devcluster-owner.json     owner pid (used to clean up after a crashed run)
    log4j2.properties
    controller-1000/          server.properties, server.log, metadata/
    broker-<id>/              server.properties, server.log,
                              metadata/   (KRaft metadata log, plain directory)
                              data/       (tmpfs mount point)
                              data/kafka-logs   (= log.dirs)
                              data-<n>/kafka-logs  (further log dirs, own tmpfs
                                                    mounts, see ``extra_log_dirs``)

Environment:
    KAFKA_JARS_DIR              jar cache directory (see jars.py)
    KAFKA_DEVCLUSTER_KEEP=1     keep a harness-created base_dir (logs) after stop()
    KAFKA_DEVCLUSTER_LOG_LEVEL  log4j root level for the nodes (default: INFO
                                with a few chatty loggers at WARN)
    KAFKA_DEVCLUSTER_CDS=0      don't use/create the class-data sharing archive

Cleanup: stop() (also run at exit) stops every node and unmounts; every java
process dies with its parent (PR_SET_PDEATHSIG); and start() removes what a
crashed run (owner pid gone) left under $TMPDIR/kafka-devcluster-*.

Stdlib only.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterable, Mapping

from ..commands import run_command
from ._proc import die_with_parent_preexec
from .jars import KAFKA_VERSION, ensure_kafka_jars

log = logging.getLogger(__name__)

CONTROLLER_ID = 1000
STARTED_MARKER = b"Kafka Server started"
TEMP_PREFIX = "kafka-devcluster-"
OWNER_FILE = "devcluster-owner.json"
ENV_LOG_LEVEL = "KAFKA_DEVCLUSTER_LOG_LEVEL"  # e.g. INFO / DEBUG: log4j root level, no quieting
ENV_CDS = "KAFKA_DEVCLUSTER_CDS"  # "0": do not use/create the AppCDS archive
ENV_KEEP = "KAFKA_DEVCLUSTER_KEEP"  # "1": keep a harness-created base_dir (logs) after stop()


_LOG4J2_PROPERTIES = """\
# Written by devtools.devcluster. Everything goes to stdout, which the harness
# redirects to <node>/server.log.
status = warn
name = devcluster
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {root_level}
rootLogger.appenderRefs = out
rootLogger.appenderRef.out.ref = STDOUT
{quiet}
"""

# Chatty loggers raised to WARN when KAFKA_DEVCLUSTER_LOG_LEVEL is unset (INFO
# for everything else: a start/stop cycle is ~60 KB of log per node).
_QUIET_LOGGERS = [
    "kafka.request.logger",
    "state.change.logger",
    "kafka.log.LogCleaner",
    "org.apache.kafka.common.utils.AppInfoParser",
    "org.apache.kafka.common.metrics",
    "org.apache.kafka.image.loader.MetadataLoader",
]
# Always at least INFO: the harness waits for "Kafka Server started" from it.
_INFO_LOGGERS = [
    "kafka.server.KafkaRaftServer",
]


# --------------------------------------------------------------------------- helpers


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def _worker_share(pool: tuple[int, int], environ: Mapping[str, str]) -> tuple[int, int]:
    """The part of ``pool`` that is this process's when the tests run in several processes
    (pytest-xdist's PYTEST_XDIST_WORKER ``gw<i>`` of PYTEST_XDIST_WORKER_COUNT): the workers'
    parts do not overlap, so a port a broker of one worker gives up while it is stopped is
    never handed to another worker's cluster or service. The whole pool otherwise."""
    worker, count = environ.get("PYTEST_XDIST_WORKER", ""), environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 1):
        return pool
    index, workers = int(worker[2:]), int(count)
    size = (pool[1] - pool[0]) // workers
    return (pool[0] + index * size, pool[0] + (index + 1) * size) if index < workers else pool


def _free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1.

    Picked at random *below the kernel's ephemeral range* (and checked by
    binding them, all at once, then released): outgoing client connections take
    their local port from the ephemeral range, so a port chosen there with
    bind(0) could be grabbed by some client while a broker is stopped, and
    ``start_broker()`` would then fail with "Address already in use". Falls back
    to bind(0) if no such range is available.
    """
    lo, hi = _ephemeral_range()
    if lo - 10000 >= 1000:
        pool = (10000, lo)
    elif 65535 - hi >= 1000:
        pool = (hi + 1, 65536)
    else:
        pool = None
    if pool:
        pool = _worker_share(pool, os.environ)
    rng = random.SystemRandom()
    socks: list[socket.socket] = []
    try:
        for _ in range(100 * n if pool else 0):
            if len(socks) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", rng.randrange(*pool)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        while len(socks) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _new_cluster_id() -> str:
    """Like org.apache.kafka.common.Uuid.randomUuid().toString(): base64url, no padding."""
    while True:
        cid = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        if not cid.startswith("-"):  # Kafka avoids ids that look like a CLI flag
            return cid


def _escape_prop(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )


def _write_properties(path: Path, props: Mapping[str, str]) -> None:
    lines = ["# Written by devtools.devcluster"]
    lines += [f"{k}={_escape_prop(str(v))}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")


def _unescape_mount_path(p: str) -> str:
    # /proc/mounts escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(p):
        if p[i] == "\\" and len(p[i + 1 : i + 4]) == 3 and p[i + 1 : i + 4].isdigit():
            out.append(chr(int(p[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(p[i])
            i += 1
    return "".join(out)


def mounts_under(directory: Path) -> list[Path]:
    """Mount points at or below ``directory`` (deepest first), from /proc/mounts."""
    try:
        text = Path("/proc/mounts").read_text()
    except OSError:
        return []
    root = str(Path(directory).resolve())
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        mp = _unescape_mount_path(parts[1])
        if mp == root or mp.startswith(root + "/"):
            found.append(Path(mp))
    return sorted(set(found), key=lambda p: len(str(p)), reverse=True)


def _umount(path: Path) -> None:
    for attempt in range(5):
        res = run_command(["umount", path], 60)
        if res.returncode == 0 or path not in mounts_under(path):
            return
        time.sleep(0.2 * (attempt + 1))
    res = run_command(["umount", "-l", path], 60)
    if res.returncode != 0 and path in mounts_under(path):
        log.error("devcluster: could not unmount %s: %s", path, res.stderr.strip())
    else:
        log.warning("devcluster: %s was busy, detached it lazily (umount -l)", path)


def _proc_start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # field 22 (starttime); the comm field (2) may contain spaces, so split after ')'
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_alive(owner: dict) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    st = _proc_start_time(pid)
    return st is not None and st == owner.get("start_time")


def _pids_referencing(path: Path) -> list[int]:
    """PIDs whose command line mentions ``path`` (our java processes carry it)."""
    needle = str(path).encode() + b"/"
    me = os.getpid()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            pids.append(int(entry.name))
    return pids


def cleanup_stale_clusters(temp_root: Path | None = None) -> list[Path]:
    """Tear down leftovers of harness-created clusters whose owner process is gone.

    Looks at ``<tmp>/kafka-devcluster-*`` directories whose owner file names a
    dead process: SIGKILLs java processes still referencing the directory,
    unmounts its tmpfs mounts and removes it. Returns the directories cleaned.
    Called automatically by ``LocalKafkaCluster.start()``.
    """
    root = Path(temp_root or tempfile.gettempdir())
    cleaned = []
    for d in root.glob(TEMP_PREFIX + "*"):
        if not d.is_dir():
            continue
        try:
            owner = json.loads((d / OWNER_FILE).read_text())
        except (OSError, ValueError):
            owner = None
        if owner is None:
            # Not (yet) claimed: leave recent ones alone (a constructor may be racing us).
            try:
                if time.time() - d.stat().st_mtime < 3600:
                    continue
            except OSError:
                continue
        elif _owner_alive(owner):
            continue
        pids, mounts = _pids_referencing(d), mounts_under(d)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for mp in mounts:
            _umount(mp)
        keep = bool(owner and owner.get("keep"))  # stopped with KAFKA_DEVCLUSTER_KEEP=1
        if not keep and not mounts_under(d):
            shutil.rmtree(d, ignore_errors=True)
        if pids or mounts or not keep:
            cleaned.append(d)
            log.warning(
                "devcluster: cleaned up stale cluster %s (killed %d processes, %d mounts)",
                d, len(pids), len(mounts),
            )
    return cleaned


# --------------------------------------------------------------------------- nodes


class _Node:
    def __init__(self, node_id: int, role: str, directory: Path):
        self.node_id = node_id
        self.role = role  # "controller" | "broker"
        self.dir = directory
        self.ports: dict[str, int] = {}
        self.proc: subprocess.Popen | None = None
        self.log_offset = 0  # where the current run's output starts in server.log
        self.cds_dump: Path | None = None  # AppCDS archive this run writes at exit
        self.check_port: int | None = None  # first port of its `listeners`
        self.extra_log_dirs = 0  # log dirs beyond the first, each on its own mount

    @property
    def mount_points(self) -> list[Path]:
        return [self.mount_point, *(self.dir / f"data-{n}" for n in range(2, self.extra_log_dirs + 2))]

    @property
    def data_dirs(self) -> list[Path]:
        """log.dirs of a broker, the first one being ``data_dir``."""
        return [mp / "kafka-logs" for mp in self.mount_points]

    @property
    def name(self) -> str:
        return f"{self.role}-{self.node_id}"

    @property
    def config_path(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.dir / "server.log"

    @property
    def metadata_dir(self) -> Path:
        return self.dir / "metadata"

    @property
    def mount_point(self) -> Path:
        return self.dir / "data"

    @property
    def data_dir(self) -> Path:
        """The first of the broker's log.dirs."""
        return self.data_dirs[0]

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 25) -> str:
        """Error lines of the current run plus its last ``lines`` lines (without
        config dumps and stack frames), for error messages."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(self.log_offset, size - 4 * 1024 * 1024))
                text = fh.read().decode(errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"
        kept = [ln for ln in text.splitlines() if not _NOISE_LINE.match(ln)]
        errors = [
            ln for ln in kept
            if " ERROR " in ln or " FATAL " in ln or ln.startswith(("Caused by", "Exception", "Error"))
        ][:12]
        out = kept[-lines:]
        if errors and any(e not in out for e in errors):
            out = ["(errors)", *errors, "(last lines)", *out]
        return "\n".join(out)


# --------------------------------------------------------------------------- cluster


class LocalKafkaCluster:
    """A dedicated KRaft controller + ``brokers`` broker-only nodes on 127.0.0.1.

    Usage::

        with LocalKafkaCluster(brokers=3) as cluster:
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
            ...

    ``broker_config`` entries override the defaults for every broker (a value
    of ``None`` removes a default); ``per_broker_config`` overrides per broker
    id; ``controller_config`` does the same for the controller.
    ``extra_listeners`` maps extra listener names to security protocols (e.g.
    ``{"SASL_PLAINTEXT": "SASL_PLAINTEXT"}``); each broker gets its own free
    port for each, see ``broker_port(id, listener)`` and
    ``bootstrap_servers_for(listener)``. Mechanism-specific settings (JAAS,
    ``sasl.enabled.mechanisms``...) go in ``broker_config``.
    ``extra_log_dirs`` maps a broker id to a number of further log dirs (JBOD),
    each on its own tmpfs mount: when one fills and Kafka takes it offline, the
    broker keeps running on the others (with a single log dir it halts).
    ``combined_broker`` makes that broker a combined node
    (``process.roles=broker,controller``): a second quorum voter beside the
    dedicated controller, so the cluster needs both running.
    ``controllers`` > 1 adds further controller-only nodes (ids 1001, 1002...)
    to the quorum; ``metadata_tmpfs_mib`` puts every node's KRaft metadata log
    dir on its own tmpfs of that size (only when ``tmpfs`` is on). Both are
    opt-in: by default there is one controller and the metadata dirs are plain
    directories.

    Every java process gets ``PR_SET_PDEATHSIG=SIGKILL`` (``kill_with_parent``),
    so it dies if the Python process dies. Note that Linux sends that signal
    when the *thread* that spawned the process exits: start the cluster and
    brokers from a long-lived thread (normally the main thread), or pass
    ``kill_with_parent=False``.
    """

    def __init__(
        self,
        *,
        base_dir: Path | str | None = None,
        brokers: int = 3,
        log_dir_size_mib: int = 64,
        tmpfs: bool | None = None,
        broker_config: Mapping[str, str | None] | None = None,
        per_broker_config: Mapping[int, Mapping[str, str | None]] | None = None,
        controller_config: Mapping[str, str | None] | None = None,
        extra_listeners: Mapping[str, str] | None = None,
        extra_classpath: Iterable[Path | str] | None = None,
        extra_log_dirs: Mapping[int, int] | None = None,
        combined_broker: int | None = None,
        controllers: int = 1,
        metadata_tmpfs_mib: int | None = None,
        heap: str = "384m",
        jvm_args: Iterable[str] | None = None,
        version: str = KAFKA_VERSION,
        jars_dir: Path | str | None = None,
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        kill_with_parent: bool = True,
    ):
        if brokers < 1:
            raise ValueError("brokers must be >= 1")
        if brokers >= CONTROLLER_ID:
            raise ValueError(f"brokers must be < {CONTROLLER_ID}")
        if log_dir_size_mib < 8:
            raise ValueError("log_dir_size_mib must be >= 8")
        self._lock = threading.RLock()
        self._owns_base_dir = base_dir is None
        if base_dir is None:
            self._base_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        else:
            self._base_dir = Path(base_dir).expanduser().resolve()
            self._base_dir.mkdir(parents=True, exist_ok=True)
        self._write_owner()
        self._num_brokers = brokers
        self._size_mib = int(log_dir_size_mib)
        if tmpfs is None:
            tmpfs = os.geteuid() == 0
            if not tmpfs:
                log.warning(
                    "devcluster: not running as root, broker log dirs are plain directories "
                    "(DescribeLogDirs TotalBytes will be the size of the file system of %s)",
                    self._base_dir,
                )
        self._tmpfs = bool(tmpfs)
        self._broker_config = dict(broker_config or {})
        self._per_broker_config = {int(k): dict(v) for k, v in (per_broker_config or {}).items()}
        self._controller_config = dict(controller_config or {})
        self._extra_listeners = dict(extra_listeners or {})
        for name in self._extra_listeners:
            if name.upper() in ("PLAINTEXT", "CONTROLLER"):
                raise ValueError(f"listener name {name} is reserved by the harness")
        self._extra_classpath = [Path(p).expanduser().resolve() for p in (extra_classpath or [])]
        self._heap = heap
        self._jvm_args = list(jvm_args or [])
        self._version = version
        self._jars_dir = Path(jars_dir).expanduser().resolve() if jars_dir else None
        self._start_timeout = float(start_timeout)
        self._stop_timeout = float(stop_timeout)
        self._kill_with_parent = kill_with_parent
        self._cluster_id: str | None = None
        self._mounted: list[Path] = []
        self._started = False
        self.last_start_timings: dict[str, float] = {}
        self._cds_path: Path | None = None

        if combined_broker is not None and not 1 <= combined_broker <= brokers:
            raise ValueError(f"combined_broker must be one of the broker ids 1..{brokers}")
        self._combined_broker = combined_broker
        if not 1 <= controllers <= 9:
            raise ValueError("controllers must be between 1 and 9")
        if metadata_tmpfs_mib is not None and metadata_tmpfs_mib < 8:
            raise ValueError("metadata_tmpfs_mib must be >= 8")
        self._metadata_tmpfs_mib = metadata_tmpfs_mib
        listener_names = ["PLAINTEXT", *self._extra_listeners]
        ports = iter(_free_ports(controllers + brokers * len(listener_names) + (combined_broker is not None)))
        self._controller = _Node(CONTROLLER_ID, "controller", self._base_dir / f"controller-{CONTROLLER_ID}")
        self._controller.ports["CONTROLLER"] = next(ports)
        # Further controller-only quorum voters beyond the first (opt-in).
        self._extra_controllers: list[_Node] = []
        for cid in range(CONTROLLER_ID + 1, CONTROLLER_ID + controllers):
            node = _Node(cid, "controller", self._base_dir / f"controller-{cid}")
            self._extra_controllers.append(node)
        self._brokers: dict[int, _Node] = {}
        for bid in range(1, brokers + 1):
            node = _Node(bid, "broker", self._base_dir / f"broker-{bid}")
            for name in listener_names:
                node.ports[name] = next(ports)
            node.extra_log_dirs = int((extra_log_dirs or {}).get(bid, 0))
            if bid == combined_broker:
                node.ports["CONTROLLER"] = next(ports)
            self._brokers[bid] = node
        for node in self._extra_controllers:
            node.ports["CONTROLLER"] = next(ports)

        self._atexit_cb = self._atexit_stop
        atexit.register(self._atexit_cb)

    # ------------------------------------------------------------------ properties

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    @property
    def cluster_id(self) -> str | None:
        return self._cluster_id

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._brokers)

    @property
    def controller_id(self) -> int:
        return CONTROLLER_ID

    @property
    def controller_port(self) -> int:
        return self._controller.ports["CONTROLLER"]

    @property
    def controller_ids(self) -> list[int]:
        """The controller-only nodes (the first is ``controller_id``)."""
        return [n.node_id for n in self._controllers()]

    @property
    def bootstrap_controllers(self) -> str:
        """``bootstrap.controllers`` for clients that talk to the quorum directly."""
        return ",".join(f"127.0.0.1:{n.ports['CONTROLLER']}" for n in self._controllers())

    def metadata_log_dir(self, node_id: int) -> Path:
        """Where the node keeps its KRaft metadata log (its own tmpfs with
        ``metadata_tmpfs_mib``)."""
        return self._node(node_id).metadata_dir

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap_servers_for("PLAINTEXT")

    def bootstrap_servers_for(self, listener: str = "PLAINTEXT") -> str:
        return ",".join(f"127.0.0.1:{self.broker_port(b, listener)}" for b in self.broker_ids)

    def broker_port(self, broker_id: int, listener: str = "PLAINTEXT") -> int:
        node = self._broker(broker_id)
        try:
            return node.ports[listener]
        except KeyError:
            raise KeyError(f"broker {broker_id} has no listener {listener!r}") from None

    def log_dir(self, broker_id: int, index: int = 0) -> Path:
        """One of the broker's ``log.dirs`` entries (the first unless it was given
        ``extra_log_dirs``), each on its own tmpfs mount."""
        return self._broker(broker_id).data_dirs[index]

    def log_dirs(self, broker_id: int) -> list[Path]:
        return self._broker(broker_id).data_dirs

    def mount_point(self, broker_id: int, index: int = 0) -> Path:
        return self._broker(broker_id).mount_points[index]

    def server_log(self, node_id: int) -> Path:
        return self._node(node_id).log_path

    def config_path(self, node_id: int) -> Path:
        return self._node(node_id).config_path

    def pids(self) -> dict[int, int]:
        """{node_id: pid} of the running java processes (controller is 1000)."""
        return {n.node_id: n.proc.pid for n in self._all_nodes() if n.running()}

    def is_running(self, node_id: int) -> bool:
        return self._node(node_id).running()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "LocalKafkaCluster":
        with self._lock:
            if self._started:
                return self
            atexit.unregister(self._atexit_cb)  # (re-)register once
            atexit.register(self._atexit_cb)
            try:
                cleanup_stale_clusters()
            except Exception:  # best effort
                log.exception("devcluster: stale cluster cleanup failed")
            try:
                t0 = time.monotonic()
                timings = self.last_start_timings = {}
                jars = self._jars_dir or ensure_kafka_jars(self._version)
                timings["jars"] = time.monotonic() - t0
                self._classpath = ":".join([f"{jars}/*", *map(str, self._extra_classpath)])
                self._java = self._find_java()
                self._cds_setup(Path(jars))
                self._prepare_dirs()
                self._mount_all()
                self._write_configs()
                t1 = time.monotonic()
                self._format_all()
                timings["format"] = time.monotonic() - t1
                t1 = time.monotonic()
                deadline = t1 + self._start_timeout
                # The brokers retry until the controller listens, so there is
                # no need to wait for it before spawning them.
                for node in self._all_nodes():
                    self._spawn(node)
                self._wait_started(self._all_nodes(), deadline)
                timings["nodes"] = time.monotonic() - t1
                timings["total"] = time.monotonic() - t0
                self._started = True
                log.info(
                    "devcluster: %d brokers up in %.1fs (format %.1fs, nodes %.1fs): %s",
                    len(self._brokers), timings["total"], timings["format"], timings["nodes"],
                    self.bootstrap_servers,
                )
            except BaseException:
                self._teardown(remove_base_dir=self._owns_base_dir and not self._keep())
                raise
            return self

    def stop(self) -> None:
        """Stop every node (SIGTERM, SIGKILL after ``stop_timeout``), unmount the
        tmpfs mounts and remove the base dir if the harness created it. Idempotent."""
        with self._lock:
            self._teardown(remove_base_dir=self._owns_base_dir and not self._keep())

    def stop_broker(self, broker_id: int, timeout: float | None = None) -> None:
        """Graceful stop (SIGTERM -> controlled shutdown), SIGKILL after ``timeout``."""
        with self._lock:
            self._terminate([self._broker(broker_id)], self._stop_timeout if timeout is None else timeout)

    def stop_node(self, node_id: int, timeout: float | None = None) -> None:
        """Graceful stop (SIGTERM) of any node, a controller-only one too; SIGKILL after ``timeout``."""
        with self._lock:
            self._terminate([self._node(node_id)], self._stop_timeout if timeout is None else timeout)

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL the broker (no controlled shutdown; the controller fences it
        after ``broker.session.timeout.ms``)."""
        with self._lock:
            self._terminate([self._broker(broker_id)], 0.0)

    def freeze_broker(self, broker_id: int) -> None:
        """SIGSTOP the broker: its sockets stay open but nothing answers (a hung JVM, a
        long GC pause). ``thaw_broker`` resumes it."""
        with self._lock:
            node = self._broker(broker_id)
            if not node.running():
                raise RuntimeError(f"devcluster: {node.name} is not running")
            _killpg(node.proc, signal.SIGSTOP)

    def thaw_broker(self, broker_id: int) -> None:
        """SIGCONT a broker frozen by ``freeze_broker``."""
        with self._lock:
            node = self._broker(broker_id)
            if node.running():
                _killpg(node.proc, signal.SIGCONT)

    def start_broker(self, broker_id: int, timeout: float | None = None) -> None:
        """(Re)start a stopped broker with its existing data; waits until started."""
        with self._lock:
            if not self._started:
                raise RuntimeError("cluster is not started")
            node = self._broker(broker_id)
            if node.running():
                return
            self._spawn(node)
            deadline = time.monotonic() + (self._start_timeout if timeout is None else timeout)
            try:
                self._wait_started([node], deadline)
            except BaseException:
                self._terminate([node], 0.0)
                raise

    def __enter__(self) -> "LocalKafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "started" if self._started else "stopped"
        return f"<LocalKafkaCluster {state} brokers={self.broker_ids} base_dir={self._base_dir}>"

    # ------------------------------------------------------------------ internals

    def _keep(self) -> bool:
        return os.environ.get(ENV_KEEP, "") not in ("", "0", "false", "no")

    def _controllers(self) -> list[_Node]:
        return [self._controller, *self._extra_controllers]

    def _all_nodes(self) -> list[_Node]:
        return [*self._controllers(), *self._brokers.values()]

    def _broker(self, broker_id: int) -> _Node:
        try:
            return self._brokers[int(broker_id)]
        except (KeyError, ValueError):
            raise KeyError(f"no broker {broker_id!r}; brokers are {self.broker_ids}") from None

    def _node(self, node_id: int) -> _Node:
        for node in self._controllers():
            if int(node_id) == node.node_id:
                return node
        return self._broker(node_id)

    def _write_owner(self, keep: bool = False) -> None:
        pid = os.getpid()
        (self._base_dir / OWNER_FILE).write_text(
            json.dumps({"pid": pid, "start_time": _proc_start_time(pid), "keep": keep}) + "\n"
        )

    @staticmethod
    def _find_java() -> str:
        home = os.environ.get("JAVA_HOME")
        if home and (Path(home) / "bin" / "java").is_file():
            return str(Path(home) / "bin" / "java")
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("devcluster: 'java' not found (set JAVA_HOME or install a JDK >= 17)")
        return java

    def _prepare_dirs(self) -> None:
        self._base_dir.mkdir(parents=True, exist_ok=True)
        self._write_owner()
        # Leftovers of an earlier run in the same base_dir (e.g. a crashed one).
        for node in self._all_nodes():
            for pid in _pids_referencing(node.dir):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            for mp in mounts_under(node.dir):
                _umount(mp)
            if node.dir.exists():
                shutil.rmtree(node.dir)
            node.dir.mkdir(parents=True)
            node.metadata_dir.mkdir()
        (self._base_dir / "log4j2.properties").write_text(self._log4j_config())
        self._cluster_id = _new_cluster_id()
        (self._base_dir / "cluster.id").write_text(self._cluster_id + "\n")

    def _log4j_config(self) -> str:
        # KAFKA_DEVCLUSTER_LOG_LEVEL=INFO/DEBUG/WARN...: log4j root level, no
        # quieting; unset: INFO with the chatty loggers at WARN.
        level = os.environ.get(ENV_LOG_LEVEL, "").upper()
        lines = []
        if not level:
            level = "INFO"
            for i, name in enumerate(_QUIET_LOGGERS):
                lines.append(f"logger.q{i}.name = {name}\nlogger.q{i}.level = WARN")
        if level not in ("ALL", "TRACE", "DEBUG"):
            for i, name in enumerate(_INFO_LOGGERS):
                lines.append(f"logger.i{i}.name = {name}\nlogger.i{i}.level = INFO")
        return _LOG4J2_PROPERTIES.format(root_level=level, quiet="\n".join(lines))

    def _mount_all(self) -> None:
        for node in self._brokers.values():
            for mp, data_dir in zip(node.mount_points, node.data_dirs):
                mp.mkdir(parents=True, exist_ok=True)
                if self._tmpfs:
                    self._mount_tmpfs(mp, self._size_mib)
                data_dir.mkdir()
        if self._tmpfs and self._metadata_tmpfs_mib is not None:
            for node in self._all_nodes():
                self._mount_tmpfs(node.metadata_dir, self._metadata_tmpfs_mib)

    def _mount_tmpfs(self, mp: Path, size_mib: int) -> None:
        res = run_command(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", "tmpfs", mp], 60)
        if res.returncode != 0:
            raise RuntimeError(
                f"devcluster: mounting a {size_mib} MiB tmpfs on {mp} failed "
                f"(exit {res.returncode}): {(res.stderr or res.stdout).strip()}\n"
                "(pass tmpfs=False to use plain directories)"
            )
        self._mounted.append(mp)

    def _quorum_voters(self) -> str:
        voters = [f"{n.node_id}@127.0.0.1:{n.ports['CONTROLLER']}" for n in self._controllers()]
        if self._combined_broker is not None:
            voters.append(f"{self._combined_broker}@127.0.0.1:{self._brokers[self._combined_broker].ports['CONTROLLER']}")
        return ",".join(voters)

    def _controller_props(self, node: _Node) -> dict[str, str]:
        props = {
            "process.roles": "controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": self._quorum_voters(),
            "controller.listener.names": "CONTROLLER",
            "listeners": f"CONTROLLER://127.0.0.1:{node.ports['CONTROLLER']}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.metadata_dir),
            "num.network.threads": "1",
            "num.io.threads": "2",
            "background.threads": "2",
            # Defaults that the controller applies to topics created without them.
            "num.partitions": "1",
            "default.replication.factor": "1",
            # Fence a SIGKILLed broker after 6 s instead of 9 s.
            "broker.session.timeout.ms": "6000",
        }
        return _merge(props, self._controller_config)

    def _broker_props(self, node: _Node) -> dict[str, str]:
        listeners = {"PLAINTEXT": "PLAINTEXT", **self._extra_listeners}
        endpoints = ",".join(f"{n}://127.0.0.1:{node.ports[n]}" for n in listeners)
        proto_map = ",".join(["CONTROLLER:PLAINTEXT", *(f"{n}:{p}" for n, p in listeners.items())])
        props = {
            "process.roles": "broker",
            "node.id": str(node.node_id),
            "controller.quorum.voters": self._quorum_voters(),
            "controller.listener.names": "CONTROLLER",
            "listeners": endpoints,
            "advertised.listeners": endpoints,
            "listener.security.protocol.map": proto_map,
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": ",".join(str(d) for d in node.data_dirs),
            # KRaft metadata log off the (small, fillable) tmpfs: a full data
            # volume must not take the metadata log down with it.
            "metadata.log.dir": str(node.metadata_dir),
            "broker.heartbeat.interval.ms": "1000",
            # internal topics: single partition, no replication, but for the group coordinator's:
            # replicated on up to 3 brokers as Kafka's default, so groups (the service's decider
            # election among them) keep a coordinator while one broker is down or halted.
            "offsets.topic.num.partitions": "1",
            "offsets.topic.replication.factor": str(min(3, len(self._brokers))),
            "offsets.topic.segment.bytes": "1048576",
            "transaction.state.log.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.segment.bytes": "1048576",
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.partitions": "1",
            "default.replication.factor": "1",
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            # small volumes: 1 MiB segments (the minimum allowed in 4.x), small index
            "log.segment.bytes": "1048576",
            "log.index.size.max.bytes": "1048576",
            # deleted topics / expired segments free disk within ~1-2 s. (The
            # broker-level name of the topic config file.delete.delay.ms; a
            # broker ignores "file.delete.delay.ms" in server.properties.)
            "log.segment.delete.delay.ms": "500",
            "log.retention.check.interval.ms": "1000",
            "log.initial.task.delay.ms": "0",
            # 2 cores for everything
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.replica.fetchers": "1",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "2",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        }
        if node.node_id == self._combined_broker:
            props["process.roles"] = "broker,controller"
            props["listeners"] += f",CONTROLLER://127.0.0.1:{node.ports['CONTROLLER']}"
        props = _merge(props, self._broker_config)
        return _merge(props, self._per_broker_config.get(node.node_id, {}))

    def _write_configs(self) -> None:
        for node in self._all_nodes():
            props = self._controller_props(node) if node.role == "controller" else self._broker_props(node)
            _write_properties(node.config_path, props)
            ports = re.findall(r":(\d+)(?:,|$)", props.get("listeners", ""))
            node.check_port = int(ports[0]) if ports else None

    def _cds_setup(self, jars: Path) -> None:
        """Class-data sharing: a dynamic AppCDS archive of the Kafka classes,
        dumped once (by the first broker, when it exits cleanly) next to the
        jars and used by every later JVM. Cuts JVM start CPU by ~25-30%, which
        matters with 4-5 JVMs booting on 2 cores. Disabled with
        KAFKA_DEVCLUSTER_CDS=0; a stale/mismatching archive is ignored by the
        JVM (-Xshare:auto)."""
        self._cds_path = None
        if os.environ.get(ENV_CDS, "1").lower() in ("0", "false", "no"):
            return
        try:
            java_real = os.path.realpath(self._java)
            st = os.stat(java_real)
            names = sorted(p.name for p in jars.glob("*.jar"))
            key = hashlib.sha1(
                f"{java_real}|{st.st_size}|{st.st_mtime_ns}|{jars}|{names}".encode()
            ).hexdigest()[:16]
            cds_dir = jars / ".cds"
            cds_dir.mkdir(exist_ok=True)
            if not os.access(cds_dir, os.W_OK):
                return
        except OSError:
            return
        self._cds_path = cds_dir / f"kafka-{key}.jsa"

    def _cds_args(self, node: _Node | None, may_dump: bool) -> list[str]:
        if self._cds_path is None:
            return []
        if self._cds_path.is_file():
            return [f"-XX:SharedArchiveFile={self._cds_path}", "-Xshare:auto", "-Xlog:cds*=off"]
        # Dump only with the plain Kafka classpath (an archive made with a plugin
        # jar on the classpath would not match runs without it).
        if may_dump and node is not None and not self._extra_classpath:
            node.cds_dump = self._cds_path.with_name(
                f"{self._cds_path.name}.{os.getpid()}.{node.node_id}.tmp"
            )
            return [f"-XX:ArchiveClassesAtExit={node.cds_dump}", "-Xlog:cds*=off"]
        return []

    def _cds_finish(self, node: _Node) -> None:
        tmp, node.cds_dump = node.cds_dump, None
        if tmp is None or self._cds_path is None:
            return
        try:
            rc = node.proc.returncode if node.proc else None
            if rc in (0, 143, -15) and tmp.is_file() and tmp.stat().st_size > 0:
                os.replace(tmp, self._cds_path)
                log.info("devcluster: wrote class-data sharing archive %s", self._cds_path)
            else:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass

    def _jvm_base(self, heap: str, node: _Node | None = None, may_dump: bool = False) -> list[str]:
        return [
            self._java,
            f"-Xmx{heap}",
            f"-Xms{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
            "-Dlog4j2.shutdownHookEnabled=false",  # all output is flushed stdout anyway
            f"-Dlog4j2.configurationFile={self._base_dir / 'log4j2.properties'}",
            *self._cds_args(node, may_dump),
            *self._jvm_args,
            "-cp",
            self._classpath,
        ]

    def _popen(self, cmd: list[str], node: _Node, out) -> subprocess.Popen:
        preexec = die_with_parent_preexec() if self._kill_with_parent else None
        return subprocess.Popen(
            cmd,
            cwd=node.dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group
            preexec_fn=preexec,
            close_fds=True,
        )

    def _format_all(self) -> None:
        """kafka-storage format for every node, in parallel.

        The quorum is static (controller.quorum.voters), so no --standalone /
        --initial-controllers flag: Kafka 4.x rejects those with static voters.
        """
        procs = []
        for node in self._all_nodes():
            cmd = [
                *self._jvm_base("128m"),
                f"-Dkafka.logs.dir={node.dir}",
                "kafka.tools.StorageTool",
                "format",
                "-t", self._cluster_id,
                "-c", str(node.config_path),
            ]
            with open(node.dir / "format.log", "wb") as out:
                procs.append((node, self._popen(cmd, node, out)))
        errors = []
        deadline = time.monotonic() + self._start_timeout
        for node, proc in procs:
            try:
                rc = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _killpg(proc, signal.SIGKILL)
                proc.wait()
                rc = "timeout"
            if rc != 0:
                tail = _useful_tail((node.dir / "format.log").read_text(errors="replace"), 30)
                errors.append(f"{node.name}: StorageTool format failed ({rc}):\n{tail}")
        if errors:
            raise RuntimeError("devcluster: " + "\n".join(errors))

    def _spawn(self, node: _Node) -> None:
        cmd = [
            *self._jvm_base(
                self._heap, node,
                may_dump=node.role == "broker" and node.node_id == min(self._brokers),
            ),
            f"-Dkafka.logs.dir={node.dir}",
            "kafka.Kafka",
            str(node.config_path),
        ]
        node.log_offset = node.log_path.stat().st_size if node.log_path.exists() else 0
        with open(node.log_path, "ab") as out:
            node.proc = self._popen(cmd, node, out)

    def _wait_started(self, nodes: list[_Node], deadline: float) -> None:
        pending = {n.node_id: n for n in nodes}
        seen_marker: set[int] = set()
        scan_from = {n.node_id: n.log_offset for n in nodes}
        while pending:
            for nid, node in list(pending.items()):
                if node.proc is None or node.proc.poll() is not None:
                    rc = node.proc.returncode if node.proc else None
                    raise RuntimeError(
                        f"devcluster: {node.name} exited with code {rc} during startup; "
                        f"last lines of {node.log_path}:\n{node.log_tail()}"
                    )
                if nid not in seen_marker:
                    found, scan_from[nid] = _scan_log(node.log_path, scan_from[nid], STARTED_MARKER)
                    if not found:
                        continue
                    seen_marker.add(nid)
                if node.check_port is None or _port_open(node.check_port):
                    del pending[nid]
            if not pending:
                break
            if time.monotonic() > deadline:
                node = next(iter(pending.values()))
                raise RuntimeError(
                    f"devcluster: timed out after {self._start_timeout:.0f}s waiting for "
                    f"{', '.join(n.name for n in pending.values())} to start; "
                    f"last lines of {node.log_path}:\n{node.log_tail()}"
                )
            time.sleep(0.1)

    def _terminate(self, nodes: list[_Node], timeout: float) -> None:
        live = [n for n in nodes if n.running()]
        sig = signal.SIGTERM if timeout > 0 else signal.SIGKILL
        for n in live:
            _killpg(n.proc, sig)
            if sig == signal.SIGTERM:
                _killpg(n.proc, signal.SIGCONT)  # a frozen node handles SIGTERM only once resumed
        deadline = time.monotonic() + timeout
        for n in live:
            if sig == signal.SIGKILL:
                n.proc.wait()
                continue
            try:
                n.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("devcluster: %s did not stop within %.0fs, SIGKILL", n.name, timeout)
                _killpg(n.proc, signal.SIGKILL)
                n.proc.wait()
        for n in nodes:
            if n.cds_dump is not None and not n.running():
                self._cds_finish(n)

    def _teardown(self, remove_base_dir: bool) -> None:
        try:
            # Without a controller a broker's controlled shutdown cannot finish:
            # don't wait the full stop_timeout for it.
            broker_timeout = self._stop_timeout if self._controller.running() else min(self._stop_timeout, 5.0)
            self._terminate(list(self._brokers.values()), broker_timeout)
            self._terminate(self._controllers(), self._stop_timeout)
        finally:
            self._started = False
            for mp in list(self._mounted):
                _umount(mp)
                self._mounted.remove(mp)
            for node in self._all_nodes():  # belt and braces
                for mp in mounts_under(node.dir):
                    _umount(mp)
            if remove_base_dir and not mounts_under(self._base_dir):
                shutil.rmtree(self._base_dir, ignore_errors=True)
            elif self._base_dir.is_dir():
                try:
                    self._write_owner(keep=True)
                except OSError:
                    pass
            atexit.unregister(self._atexit_cb)

    def _atexit_stop(self) -> None:
        try:
            self.stop()
        except Exception:
            log.exception("devcluster: stop() at exit failed")


def _merge(base: dict[str, str], overrides: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(base)
    for k, v in overrides.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = str(v)
    return out


def _killpg(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _scan_log(path: Path, offset: int, needle: bytes) -> tuple[bool, int]:
    """Search ``needle`` in ``path`` from ``offset``; returns (found, next offset)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return False, offset
    if needle in data:
        return True, offset + len(data)
    # keep an overlap so a needle split across reads is still found
    return False, max(offset, offset + len(data) - len(needle))


# "KafkaConfig values:" dump lines and Java stack frames
_NOISE_LINE = re.compile(r"^\t(?:[\w.-]+ = |at |\.\.\. \d+ more)")


def _useful_tail(text: str, lines: int) -> str:
    """Last ``lines`` lines, minus config dump lines and stack frames."""
    kept = [ln for ln in text.splitlines() if not _NOISE_LINE.match(ln)]
    return "\n".join(kept[-lines:])


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False
