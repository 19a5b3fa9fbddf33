"""DescribeAcls, CreateAcls, DeleteAcls: SECURITY_DISABLED as Kafka answers without an
authorizer, in every served version."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import create_acls, delete_acls, describe_acls
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make

from .harness import call

TOPIC, LITERAL, READ, ALLOW = 2, 3, 3, 3
ANY = 1


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
