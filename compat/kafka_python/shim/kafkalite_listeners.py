"""kafkalite compat runner: kafka-python's SASL and SSL fixtures on kafkalite's listeners.

Loaded with `-p test.kafkalite_listeners` by compat/kafka_python/security.py, which starts
one kafkalite broker with a listener per security protocol the tests ask for and names their
ports in $KAFKALITE_LISTENERS (JSON, protocol -> port). KafkaFixture.instance() (the suite's
way to start a Kafka of its own, here with transport SASL_PLAINTEXT or SSL) returns an
external fixture on that listener instead: the same client settings (user alice with
password alice-secret, the mechanism asked for, the CA in <ssl_dir>/ca-cert with hostname
checks off, as kafka-python's fixture sets them), nothing spawned. $KAFKALITE_SSL_DIR holds
the broker's CA as `ca-cert`. KAFKA_URI stays unset, so the SASL tests do not skip
themselves; every other use of KafkaFixture.instance goes to the PLAINTEXT listener.

get_topic_names() runs kafka-topics.sh (Apache Kafka's Java admin client, seconds of JVM
start each) unless $KAFKALITE_TOPICS_TOOL is `admin`: then kafka-python's own admin client
lists the topics, over the same listener with the same credentials (the quick CI run).

With $KAFKALITE_SASL_TRANSPORT=SASL_SSL the SASL fixtures use the SASL_SSL listener instead
of SASL_PLAINTEXT (the same tests over TLS; kafka-python's fixture then also sets the CA).
"""

import json
import os

import py
from test.integration.fixtures import KafkaFixture


def _instance(
    cls,
    broker_id,
    zookeeper=None,
    zk_chroot=None,
    host="localhost",
    port=None,
    external=False,
    transport="PLAINTEXT",
    replicas=1,
    partitions=4,
    sasl_mechanism=None,
    auto_create_topic=True,
    tmp_dir=None,
):
    ports = json.loads(os.environ["KAFKALITE_LISTENERS"])
    transport = transport.upper()
    if transport == "SASL_PLAINTEXT":
        transport = os.environ.get("KAFKALITE_SASL_TRANSPORT", transport)
    fixture = cls(
        host,
        ports[transport],
        broker_id,
        replicas=replicas,
        partitions=partitions,
        transport=transport,
        sasl_mechanism=sasl_mechanism,
        auto_create_topic=auto_create_topic,
        # kafka-topics.sh's --command-config is rendered there (close() removes it)
        tmp_dir=tmp_dir if tmp_dir is not None else py.path.local.mkdtemp(),
        external=True,
    )
    if fixture.ssl_enabled:
        fixture.ssl_dir = os.environ["KAFKALITE_SSL_DIR"]
    fixture.jaas_config = fixture._jaas_config()
    return fixture


def _topic_names_by_admin(self):
    from kafka import KafkaAdminClient

    with KafkaAdminClient(**self._enrich_client_params({}, client_id="topic_lister")) as admin:
        return admin.list_topics()


KafkaFixture.instance = classmethod(_instance)
if os.environ.get("KAFKALITE_TOPICS_TOOL") == "admin":
    KafkaFixture.get_topic_names = _topic_names_by_admin
