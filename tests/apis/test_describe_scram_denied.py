"""DescribeUserScramCredentials refused for lack of Describe on the cluster answers as
Kafka's DescribeUserScramCredentialsRequest.getErrorResponse does: the error at the top and
once per user asked for (user name empty, no message), as Apache Kafka 4.4 answers in
compat/test_security.py."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.apis import describe_user_scram_credentials
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make
from tests.apis.test_authorization import call_as_alice, secured  # noqa: F401 (fixture)

DENIED = ErrorCode.cluster_authorization_failed


def _describe(broker: Broker, users: tuple[str, ...] | None) -> object:
    return call_as_alice(
        broker,
        describe_user_scram_credentials.API,
        0,
        lambda m: make(
            m.DescribeUserScramCredentialsRequest,
            users=None if users is None else tuple(make(m.UserName, name=u) for u in users),
        ),
    )


def test_a_denied_describe_has_one_result_per_user_asked_for(secured: Broker) -> None:  # noqa: F811
    answer = _describe(secured, ("carol", "dave"))
    assert (answer.error_code, answer.error_message) == (DENIED, None)
    results = [(r.user, r.error_code, r.error_message, r.credential_infos) for r in answer.results]
    assert results == [
        ("", DENIED, None, ()),
        ("", DENIED, None, ()),
    ]


def test_a_denied_describe_of_all_users_has_no_result(secured: Broker) -> None:  # noqa: F811
    answer = _describe(secured, None)
    assert (answer.error_code, answer.results) == (DENIED, ())
