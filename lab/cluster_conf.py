"""What the local cluster (`lab.cluster`) is made of: the settings and heaps of its ZooKeeper,
bookie and brokers, the load managers it can run, and `ClusterProcess`, one of its JVMs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pulsar_lens.lab.processes import kill_group, log_tail, terminate_group

CLUSTER_NAME = "local"
LOAD_MANAGERS: Mapping[str, str] = {
    "modular": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "extensible": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
}
TRANSFER_SHEDDER = "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"

BROKER_SETTINGS: Mapping[str, str] = {
    "advertisedAddress": "127.0.0.1",
    "bindAddress": "127.0.0.1",
    "managedLedgerDefaultEnsembleSize": "1",
    "managedLedgerDefaultWriteQuorum": "1",
    "managedLedgerDefaultAckQuorum": "1",
    "managedLedgerCacheSizeMB": "32",
    "functionsWorkerEnabled": "false",
    "transactionCoordinatorEnabled": "false",
    "enablePackagesManagement": "false",
    "webSocketServiceEnabled": "false",
    "systemTopicEnabled": "true",
    "topicLevelPoliciesEnabled": "true",
    "allowAutoTopicCreation": "true",
    "allowAutoTopicCreationType": "non-partitioned",
    "brokerDeleteInactiveTopicsEnabled": "false",
    "loadBalancerEnabled": "true",
    "loadBalancerSheddingEnabled": "false",  # bundles move only when an unload asks
    "loadBalancerAutoBundleSplitEnabled": "false",
    "loadBalancerAutoUnloadSplitBundlesEnabled": "false",
    "defaultNumberOfNamespaceBundles": "4",
    "statsUpdateFrequencyInSecs": "2",
    "statsUpdateInitialDelayInSecs": "1",
}

BOOKIE_SETTINGS: Mapping[str, str] = {
    "advertisedAddress": "127.0.0.1",
    "listeningInterface": "lo",  # bind the advertised 127.0.0.1, not every interface
    "allowLoopback": "true",
    "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
    "dbStorage_writeCacheMaxSizeMb": "32",
    "dbStorage_readAheadCacheMaxSizeMb": "32",
    "journalSyncData": "false",
    "journalMaxGroupWaitMSec": "1",
    "diskUsageThreshold": "0.99",
    "diskUsageWarnThreshold": "0.99",
    "gcWaitTime": "300000",
    "httpServerEnabled": "false",
    "statsProviderClass": "org.apache.bookkeeper.stats.NullStatsProvider",
}

ZK_HEAP = ("-Xms64m", "-Xmx128m")
BOOKIE_HEAP = ("-Xms128m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m")
BROKER_HEAP = ("-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=512m")


@dataclass
class ClusterProcess:
    """One JVM of the cluster: its role, ports and process group."""

    name: str  # "zookeeper", "bookie", "broker-0", ...
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    web_port: int = 0  # brokers only
    broker_port: int = 0  # brokers only

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def broker_id(self) -> str:
        """The id `/admin/v2/brokers/{cluster}` lists this broker under."""
        return f"127.0.0.1:{self.web_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def stop(self, grace: float) -> None:
        if self.process is not None:
            terminate_group(self.process.pid, grace=grace, child=self.process)
            self.process = None

    def kill(self) -> None:
        """SIGKILL the JVM (a crash: no shutdown hook, no release of what it owns) and reap it."""
        if self.process is not None:
            kill_group(self.process)
            self.process = None


def write_properties(path: Path, settings: Mapping[str, str]) -> None:
    """A Java properties file of `settings`, one `key=value` a line."""
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
