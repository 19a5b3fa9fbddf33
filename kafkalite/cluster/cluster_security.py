"""`kafkalite cluster --secure`: the cluster's own CA, broker certificate and SASL users.

Under `<data-dir>/security/`: `ca.pem` (the CA clients trust), `broker.pem` (the brokers'
key and certificate chain, SANs localhost and 127.0.0.1, as librdkafka and Kafka's clients
check host names) and `client.properties` (for Kafka's tools' `--command-config`). Brokers
serve one SASL_SSL listener, for clients and for each other: PLAIN users `broker` (the
brokers' own login) and `admin`, both super users of an ACL authorizer, with passwords
generated on every start (as are the certificates), so nothing of a previous run opens this one.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

MECHANISM = "PLAIN"  # needs no user in ZooKeeper before the brokers replicate
BROKER_USER = "broker"
ADMIN_USER = "admin"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@dataclass(frozen=True)
class ClusterSecurity:
    folder: Path
    broker_password: str
    admin_password: str

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def keystore_file(self) -> Path:
        return self.folder / "broker.pem"

    @property
    def client_properties_file(self) -> Path:
        return self.folder / "client.properties"

    def broker_properties(self) -> dict[str, str]:
        """For every broker; the launcher sets `listeners=SASL_SSL://...` itself."""
        users = f' user_{BROKER_USER}="{self.broker_password}"'
        users += f' user_{ADMIN_USER}="{self.admin_password}"'
        own_login = f' username="{BROKER_USER}" password="{self.broker_password}"'
        return {
            "sasl.enabled.mechanisms": MECHANISM,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": f"{PLAIN_LOGIN}{own_login}{users};",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore_file),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{BROKER_USER};User:{ADMIN_USER}",
        }

    def client_config(self, bootstrap: str) -> dict[str, str]:
        """The admin's settings for librdkafka (confluent-kafka)."""
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": self.admin_password,
            "ssl.ca.location": str(self.ca_file),
        }

    def write_client_properties(self, bootstrap: str) -> Path:
        """The admin's settings for Kafka's Java clients and tools."""
        login = f'{PLAIN_LOGIN} username="{ADMIN_USER}" password="{self.admin_password}";'
        lines = [
            f"bootstrap.servers={bootstrap}",
            "security.protocol=SASL_SSL",
            f"sasl.mechanism={MECHANISM}",
            f"sasl.jaas.config={login}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.ca_file}",
        ]
        self.client_properties_file.write_text("\n".join(lines) + "\n")
        self.client_properties_file.chmod(0o600)  # it holds the admin's password
        return self.client_properties_file


def generate(data_dir: Path) -> ClusterSecurity:
    """A new CA, broker certificate and passwords, written under `data_dir/security`."""
    folder = data_dir / "security"
    folder.mkdir(parents=True, exist_ok=True)
    security = ClusterSecurity(folder, secrets.token_urlsafe(18), secrets.token_urlsafe(18))
    import trustme  # here: only `kafkalite cluster --secure` loads it (and cryptography)

    ca = trustme.CA(organization_name="kafkalite cluster")
    broker = ca.issue_cert("localhost", "127.0.0.1", common_name="kafkalite broker")
    ca.cert_pem.write_to_path(str(security.ca_file))
    broker.private_key_and_cert_chain_pem.write_to_path(str(security.keystore_file))
    security.keystore_file.chmod(0o600)  # the broker's private key
    return security
