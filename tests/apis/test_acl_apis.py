"""DescribeAcls, CreateAcls, DeleteAcls: SECURITY_DISABLED as Kafka answers without an
authorizer, in every served version; with one, ACLs created, described by LITERAL, PREFIXED
and MATCH filters, deleted per filter, refused without ALTER/DESCRIBE on the cluster, and
kept across a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import create_acls, delete_acls, describe_acls
from kafkalite.apis.base import RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.security.principal import KafkaPrincipal

from .conftest import open_broker
from .harness import call, request_module, roundtrip, run_handler

TOPIC, LITERAL, READ, ALLOW = 2, 3, 3, 3
ANY = 1
TOPIC_TYPE = ResourceType.TOPIC


def acl_fields() -> dict[str, Any]:
    return {
        "resource_type": TOPIC,
        "resource_name": "t",
        "resource_pattern_type": LITERAL,
        "principal": "User:alice",
        "host": "*",
        "operation": READ,
        "permission_type": ALLOW,
    }


def filter_fields() -> dict[str, Any]:
    return {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }


@pytest.mark.parametrize("version", [1, 2, 3])
def test_describe_acls_security_disabled(broker: Broker, version: int) -> None:
    response = call(
        broker,
        describe_acls.API,
        version,
        lambda m: make(m.DescribeAclsRequest, **filter_fields()),
    )
    assert response.error_code == ErrorCode.security_disabled
    assert response.error_message == "No Authorizer is configured on the broker"
    assert response.resources == ()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_acls_fails_every_creation(broker: Broker, version: int) -> None:
    def build(m: Any) -> Any:
        creation = make(m.AclCreation, **acl_fields())
        return make(m.CreateAclsRequest, creations=(creation, creation))

    response = call(broker, create_acls.API, version, build)
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.")
    ] * 2


@pytest.mark.parametrize("version", [1, 2, 3])
def test_delete_acls_fails_every_filter(broker: Broker, version: int) -> None:
    def build(m: Any) -> Any:
        return make(m.DeleteAclsRequest, filters=(make(m.DeleteAclsFilter, **filter_fields()),))

    (result,) = call(broker, delete_acls.API, version, build).filter_results
    assert (result.error_code, result.error_message, result.matching_acls) == (
        ErrorCode.security_disabled,
        "No Authorizer is configured.",
        (),
    )


# -- with an authorizer -------------------------------------------------------------------------

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}
ADMIN, ALICE = KafkaPrincipal("User", "admin"), KafkaPrincipal("User", "alice")
PREFIXED, MATCH, DENY, WRITE, ALTER, CLUSTER = 4, 2, 2, 4, 7, 4


def call_as(broker: Broker, principal: KafkaPrincipal, api: Any, version: int, build: Any) -> Any:
    request = build(request_module(api.api_key, version))
    ctx = RequestContext(
        broker,
        api.api_key,
        version,
        correlation_id=11,
        client_id="tests",
        client_host="/127.0.0.1",
        principal=principal,
        authorizer=broker.authorizer,
    )
    response = run_handler(api, ctx, request)
    assert roundtrip(response) == response
    return response


def create(broker: Broker, principal: KafkaPrincipal, *creations: dict[str, Any]) -> Any:
    def build(m: Any) -> Any:
        return make(
            m.CreateAclsRequest, creations=tuple(make(m.AclCreation, **c) for c in creations)
        )

    return call_as(broker, principal, create_acls.API, 3, build).results


def describe(broker: Broker, principal: KafkaPrincipal, **filters: Any) -> Any:
    fields = {**filter_fields(), **filters}
    return call_as(
        broker,
        principal,
        describe_acls.API,
        3,
        lambda m: make(m.DescribeAclsRequest, **fields),
    )


@pytest.fixture
def secured(broker_factory: Any) -> Broker:
    return broker_factory(**AUTHORIZER)


def test_create_describe_delete(secured: Broker) -> None:
    prefixed = {**acl_fields(), "resource_name": "logs-", "resource_pattern_type": PREFIXED}
    denied = {**acl_fields(), "operation": WRITE, "permission_type": DENY}
    results = create(secured, ADMIN, acl_fields(), prefixed, denied)
    assert [(r.error_code, r.error_message) for r in results] == [(ErrorCode.none, None)] * 3

    described = describe(secured, ADMIN)
    assert described.error_code == ErrorCode.none
    assert [(r.resource_name, r.pattern_type, len(r.acls)) for r in described.resources] == [
        ("logs-", PREFIXED, 1),
        ("t", LITERAL, 2),
    ]
    matching = describe(
        secured, ADMIN, resource_name_filter="logs-1", pattern_type_filter=MATCH
    ).resources
    assert [(r.resource_name, r.pattern_type) for r in matching] == [("logs-", PREFIXED)]

    def build(m: Any) -> Any:
        fields = {**filter_fields(), "resource_name_filter": "t", "operation": WRITE}
        unknown = {**filter_fields(), "operation": 0}
        return make(
            m.DeleteAclsRequest,
            filters=(make(m.DeleteAclsFilter, **fields), make(m.DeleteAclsFilter, **unknown)),
        )

    first, second = call_as(secured, ADMIN, delete_acls.API, 3, build).filter_results
    assert first.error_code == ErrorCode.none
    assert [(a.resource_name, a.operation, a.permission_type) for a in first.matching_acls] == [
        ("t", WRITE, DENY)
    ]
    assert second.error_code == ErrorCode.invalid_request
    assert len(describe(secured, ADMIN).resources) == 2


def test_invalid_creations_fail_alone(secured: Broker) -> None:
    cluster = {**acl_fields(), "resource_type": CLUSTER, "resource_name": "other"}
    results = create(secured, ADMIN, cluster, acl_fields())
    assert [(r.error_code, r.error_message) for r in results] == [
        (
            ErrorCode.invalid_request,
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (ErrorCode.none, None),
    ]


def test_acl_apis_need_cluster_alter_and_describe(secured: Broker) -> None:
    results = create(secured, ALICE, acl_fields())
    assert [r.error_code for r in results] == [ErrorCode.cluster_authorization_failed]
    assert describe(secured, ALICE).error_code == ErrorCode.cluster_authorization_failed
    grant = {
        **acl_fields(),
        "resource_type": CLUSTER,
        "resource_name": "kafka-cluster",
        "operation": ALTER,
    }
    create(secured, ADMIN, grant)
    assert describe(secured, ALICE).error_code == ErrorCode.none  # ALTER implies DESCRIBE
    assert [r.error_code for r in create(secured, ALICE, acl_fields())] == [ErrorCode.none]


def test_acls_survive_a_restart(broker_factory: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "restarted"
    first = open_broker(data_dir, AUTHORIZER)
    create(first, ADMIN, acl_fields())
    first.shutdown()
    again = open_broker(data_dir, AUTHORIZER)
    try:
        (resource,) = describe(again, ADMIN).resources
        assert (resource.resource_name, len(resource.acls)) == ("t", 1)
        assert again.authorizer is not None
        assert again.authorizer.authorize(ALICE, "127.0.0.1", AclOperation.READ, TOPIC_TYPE, "t")
    finally:
        again.shutdown()
