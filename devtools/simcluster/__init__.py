"""A simulated Apache Kafka cluster for tests and benchmarks: N brokers on loopback, each on
its own port, speaking Kafka's wire protocol (kafka-python's own message classes) for the
requests the throttle service sends: ApiVersions, Metadata, DescribeCluster (v2, fenced
brokers) and DescribeLogDirs (v4+, TotalBytes/UsableBytes). The test drives the volumes, the
fencing, offline log dirs and brokers that stop or stop answering.

In-process: ``SimulatedCluster`` (its own event loop thread). In a process of its own, for
benchmarks that measure the client's CPU and not the simulation's: ``python -m
devtools.simcluster`` and ``SimulatedClusterProcess``."""

from .cluster import SimulatedCluster
from .process import SimulatedClusterProcess
from .state import MiB

__all__ = ["MiB", "SimulatedCluster", "SimulatedClusterProcess"]
