"""kafka-python's SASL and SSL integration tests (from the same sdist as run.py) against
kafkalite (issue 20, stock clients):

    python -m compat.kafka_python.security [--update-allowlist]

prints the counts and exits 1 when a test of `security_tests.allow` does not pass.

The suite's fixtures start a Kafka of their own for these tests (SASL_PLAINTEXT with
PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 for user alice; SSL with a CA in `ssl_dir/ca-cert`).
Here one kafkalite broker (in this process, kafkalite.testing.EmbeddedBroker) has what
they would configure: listeners PLAINTEXT, SASL_PLAINTEXT and SSL; PLAIN's user alice in the
listener's JAAS config and alice's SCRAM credentials for both mechanisms (created with
AlterUserScramCredentials, as kafka-python's `kafka-storage format --add-scram` does); the
authorizer with `allow.everyone.if.no.acl.found=true` (kafka-python's broker template); a
`trustme` CA and broker certificate (PEM) instead of its keytool-made JKS files. The shim
test/kafkalite_listeners.py points the fixtures at these listeners. test_admin lists topics
with `kafka-topics.sh --command-config` (the Java admin client over SASL): KAFKA_ROOT gets a
bin/kafka-topics.sh that runs Apache Kafka's TopicCommand from compat/kafka_tools.py's jars
(`java_tool=False`, CI's quick run, lists them with kafka-python's admin client instead).
`--sasl-over-ssl` runs the SASL tests on a SASL_SSL listener instead (the same 9 tests over
TLS; topics listed with kafka-python's admin client, as the suite's kafka-topics.sh template
has no truststore).

Not run against Apache Kafka (the suite's own fixtures would need Kafka's distribution
and JKS tooling; compat/test_security*.py compares SASL and TLS with Kafka). About 40 s on
a loaded 2-core machine, 20 s of it the three kafka-topics.sh JVMs (CI:
compat/test_kafka_python_security.py, without them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from compat.kafka_python import run
from compat.kafka_python.common import Counts, locked, report_allowlist

ALLOWLIST = run.HERE / "security_tests.allow"
TEST_FILES = (
    "test/integration/test_sasl_integration.py",
    "test/integration/test_ssl_integration.py",
)
ALLOWLIST_HEADER = f"""
kafka-python {run.KAFKA_PYTHON_VERSION} SASL and SSL tests that MUST pass on kafkalite
(python -m compat.kafka_python.security; regenerate with --update-allowlist).
Tests not listed fail on kafkalite: compat/FINDINGS.md, section "kafka-python", says why.
"""
SUITE = run.WORK / f"suite-{run.KAFKA_PYTHON_VERSION}-security"
SHIMS = {
    **run.SHIMS,
    "kafkalite_listeners.py": "test/kafkalite_listeners.py",
    # The template of kafka-topics.sh's --command-config (kafka-python's repository has it
    # under servers/, which the sdist leaves out).
    "sasl_command.conf": "servers/resources/default/sasl_command.conf",
}
USER, PASSWORD = "alice", "alice-secret"  # kafka-python's KafkaFixture.broker_user
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required"
    f' username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";'
)
LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")


def broker_overrides(keystore: Path) -> dict[str, str]:
    """run.py's (kafka-python's broker template, its authorizer too) and the listeners."""
    return {
        **run.overrides_for("kafkalite"),
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }


def write_pki(folder: Path) -> Path:
    """<folder>/ca-cert (the CA, as the suite names it) and the broker's PEM keystore."""
    import trustme

    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    ca.cert_pem.write_to_path(str(folder / "ca-cert"))
    keystore = folder / "broker.pem"
    server.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    return keystore


def add_scram_users(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsertions = [
        UserScramCredentialUpsertion(USER, ScramCredentialInfo(mechanism, 4096), PASSWORD.encode())
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(timeout=30)


def write_kafka_root(folder: Path) -> Path:
    """A KAFKA_ROOT whose bin/kafka-topics.sh runs Apache Kafka's TopicCommand."""
    from compat.kafka_dist import java_executable
    from compat.kafka_tools import SHORT_RUN_JVM, TOOLS, tools_lib

    script = folder / "bin" / "kafka-topics.sh"
    script.parent.mkdir(parents=True)
    jvm = " ".join(SHORT_RUN_JVM)
    script.write_text(
        "#!/bin/sh\n"
        f'exec "{java_executable()}" -Xmx256m {jvm} -cp "{tools_lib()}/*" '
        f'{TOOLS["kafka-topics"]} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


@contextlib.contextmanager
def secure_broker(
    work: Path, java_tool: bool = True, sasl_transport: str = "SASL_PLAINTEXT"
) -> Iterator[tuple[str, dict[str, str]]]:
    """The broker; yields its PLAINTEXT bootstrap and the suite's environment."""
    from kafkalite.testing import EmbeddedBroker

    ssl_dir = work / "ssl"
    ssl_dir.mkdir()
    keystore = write_pki(ssl_dir)
    kafka_root = work / "kafka-root"
    if java_tool:
        write_kafka_root(kafka_root)
    else:
        kafka_root.mkdir()  # must exist (kafka-python's Fixture checks)
    with EmbeddedBroker(work / "data", broker_overrides(keystore)) as broker:
        add_scram_users(broker.bootstrap_of("PLAINTEXT"))
        ports = {name: broker.listener_ports[name] for name in LISTENERS}
        yield (
            broker.bootstrap_of("PLAINTEXT"),
            {
                "KAFKALITE_LISTENERS": json.dumps(ports),
                "KAFKALITE_SSL_DIR": str(ssl_dir),
                "KAFKA_ROOT": str(kafka_root),
                "KAFKALITE_TOPICS_TOOL": "kafka-topics.sh" if java_tool else "admin",
                "KAFKALITE_SASL_TRANSPORT": sasl_transport,
            },
        )


def ensure_setup() -> None:
    """run.py's setup, then this suite's directory (not run.py's: both may run at once)."""
    run.ensure_setup()
    with locked(run.WORK / ".lock"):
        run.ensure_suite(SUITE, SHIMS)


def run_secure(work: Path, java_tool: bool = True, sasl_over_ssl: bool = False) -> Counts:
    transport = "SASL_SSL" if sasl_over_ssl else "SASL_PLAINTEXT"
    with secure_broker(work, java_tool and not sasl_over_ssl, transport) as (bootstrap, env):
        return run.main(
            bootstrap,
            "kafkalite",
            test_files=TEST_FILES,
            allowlist=ALLOWLIST,
            log_name=f"kafkalite-security-{transport.lower()}",
            secure_env=env,
            suite=SUITE,
        )


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compat.kafka_python.security", description=__doc__)
    parser.add_argument("--update-allowlist", action="store_true")
    parser.add_argument(
        "--no-java",
        action="store_true",
        help="list topics with kafka-python's admin client, not kafka-topics.sh",
    )
    parser.add_argument(
        "--sasl-over-ssl", action="store_true", help="the SASL tests on the SASL_SSL listener"
    )
    args = parser.parse_args(argv)
    ensure_setup()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kafka-python-security-") as tmp:
        counts = run_secure(Path(tmp), java_tool=not args.no_java, sasl_over_ssl=args.sasl_over_ssl)
    print(f"{counts.summary()} (with broker: {time.monotonic() - started:.0f}s)")
    return report_allowlist(
        counts,
        ALLOWLIST,
        ALLOWLIST_HEADER,
        args.update_allowlist,
        "on kafkalite",
    )


if __name__ == "__main__":
    sys.exit(cli())
