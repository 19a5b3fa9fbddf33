"""`--secure`: the run on SASL_SSL, its workload authenticated as a user that is not a
super user and holds only the ACLs it needs.

The brokers get what `kafkalite cluster --secure` gives them (kafkalite/cluster/
cluster_security.py: a CA and broker certificate under `<run>/security/`, one SASL_SSL
listener used by clients and by the brokers for each other as the PLAIN super user `broker`,
an ACL authorizer, the PLAIN super user `admin`), plus SCRAM-SHA-256. The harness works as
`admin` (topics, metadata of the faults, the ends of the log); once the brokers are up it
creates the SCRAM-SHA-256 user `chaos-client` (AlterUserScramCredentials, stored in
ZooKeeper's `/config/users/` in a cluster) and its ACLs, all PREFIXED `chaos`: Read and Write
on the topics, Read on the groups, Write on the transactional ids (Write on a topic is what
an idempotent producer's InitProducerId needs, KIP-679). Producers, consumers, transforms and
the drains log in as `chaos-client` (`chaos.workload --client-config <run>/security/
client.json`), through the proxies, which pass the TLS bytes as they are.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from kafkalite.cluster.cluster_security import ClusterSecurity, generate

WORKLOAD_USER = "chaos-client"
WORKLOAD_MECHANISM = "SCRAM-SHA-256"
PREFIX = "chaos"  # topics chaos, chaos-out; groups chaos, chaos-txn, ...; ids chaos-...
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclass(frozen=True)
class ChaosSecurity:
    cluster: ClusterSecurity
    workload_password: str

    @property
    def workload_config_file(self) -> Path:
        return self.cluster.folder / "client.json"

    def broker_overrides(self) -> dict[str, str]:
        return {
            **self.cluster.broker_properties(),
            "sasl.enabled.mechanisms": f"PLAIN,{WORKLOAD_MECHANISM}",
            f"listener.name.sasl_ssl.{WORKLOAD_MECHANISM.lower()}.sasl.jaas.config": SCRAM_LOGIN,
        }

    def admin_config(self) -> dict[str, str]:
        """The super user's librdkafka settings, without bootstrap.servers."""
        config = self.cluster.client_config("")
        del config["bootstrap.servers"]
        return config

    def workload_config(self) -> dict[str, str]:
        return {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.cluster.ca_file),
            "sasl.mechanism": WORKLOAD_MECHANISM,
            "sasl.username": WORKLOAD_USER,
            "sasl.password": self.workload_password,
        }


def generate_security(run_dir: Path) -> ChaosSecurity:
    security = ChaosSecurity(generate(run_dir), secrets.token_urlsafe(18))
    security.workload_config_file.write_text(json.dumps(security.workload_config(), indent=1))
    security.workload_config_file.chmod(0o600)  # it holds the password
    return security


def grant_workload(security: ChaosSecurity, bootstrap: str, timeout: float = 60.0) -> None:
    """The workload's user and its ACLs; returns once the user can log in and read."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({**security.admin_config(), "bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion(WORKLOAD_USER, info, security.workload_password.encode())
    admin.alter_user_scram_credentials([upsert])[WORKLOAD_USER].result(timeout)
    grants = [
        (ResourceType.TOPIC, AclOperation.READ),
        (ResourceType.TOPIC, AclOperation.WRITE),
        (ResourceType.GROUP, AclOperation.READ),
        (ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE),
    ]
    bindings = [
        AclBinding(
            kind,
            PREFIX,
            ResourcePatternType.PREFIXED,
            f"User:{WORKLOAD_USER}",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for kind, operation in grants
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout)
    _await_login(security, bootstrap, timeout)
    _check_not_super_user(security, bootstrap, timeout)


def _check_not_super_user(security: ChaosSecurity, bootstrap: str, timeout: float) -> None:
    """The workload user may do nothing on the cluster (KIP-430's authorized operations):
    the ACLs above are all it has, so the run shows they suffice."""
    from confluent_kafka.admin import AdminClient

    client = AdminClient({**security.workload_config(), "bootstrap.servers": bootstrap})
    described = client.describe_cluster(include_authorized_operations=True).result(timeout)
    if described.authorized_operations:
        allowed = sorted(op.name for op in described.authorized_operations)
        raise RuntimeError(f"{WORKLOAD_USER} may {allowed} on the cluster: not a plain user")


def _await_login(security: ChaosSecurity, bootstrap: str, timeout: float) -> None:
    """Every broker has the credential and the ACLs (they apply ZooKeeper's notifications)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    for address in bootstrap.split(","):
        client = AdminClient(
            {**security.workload_config(), "bootstrap.servers": address, "log_level": 0}
        )
        while True:  # the harness waits on brokers, not a test: polling with a deadline
            try:
                metadata = client.list_topics(timeout=5)
                if PREFIX in metadata.topics and metadata.topics[PREFIX].error is None:
                    break
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{WORKLOAD_USER} cannot describe {PREFIX} on {address}")
            time.sleep(0.2)
