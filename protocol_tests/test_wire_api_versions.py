"""ApiVersions (key 18): every served version, unknown versions, and what is advertised."""

from __future__ import annotations

import pytest

from protocol_tests.raw_client import RawClient, api_versions_request, response_class

UNSUPPORTED_VERSION = 35


def _advertised(response: object) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_served_version(client: RawClient, version: int) -> None:
    response = client.request(api_versions_request(version))
    assert response.error_code == 0
    advertised = _advertised(response)
    assert advertised[18] == (0, 4)
    for api_key in (0, 1, 2, 3, 22):  # produce, fetch, list offsets, metadata, init pid
        assert api_key in advertised, f"API {api_key} not advertised"
        low, high = advertised[api_key]
        assert 0 <= low <= high


@pytest.mark.parametrize("version", [5, 99])
def test_api_versions_unknown_version_answered_in_v0(client: RawClient, version: int) -> None:
    """Kafka answers an ApiVersions version it does not know with a v0-format response,
    UNSUPPORTED_VERSION and its API list, so the client can retry with one it knows."""
    cid = client.send(api_versions_request(3), api_version=version)
    got, response = client.recv(response_class(18, 0))
    assert got == cid
    assert response.error_code == UNSUPPORTED_VERSION
    advertised = _advertised(response)
    assert advertised[18] == (0, 4)
    assert 0 in advertised and 1 in advertised and 3 in advertised
    # The connection stays usable: retry with a known version.
    assert client.request(api_versions_request(3)).error_code == 0


def test_api_versions_advertises_produce_from_v0(client: RawClient) -> None:
    """librdkafka turns compression off unless Produce's advertised min version is 0."""
    advertised = _advertised(client.request(api_versions_request(3)))
    low, high = advertised[0]
    assert low == 0
    assert high >= 9


def test_api_versions_advertises_offset_for_leader_epoch_like_kafka4(client: RawClient) -> None:
    advertised = _advertised(client.request(api_versions_request(3)))
    assert advertised[23] == (2, 4)  # Kafka 4.4 advertises 2-4; librdkafka sends v2


def test_api_versions_advertises_admin_apis(client: RawClient) -> None:
    advertised = _advertised(client.request(api_versions_request(3)))
    for api_key in (19, 20, 21, 32, 37, 44, 60):
        assert api_key in advertised, f"admin API {api_key} not advertised"


def test_api_versions_fields_of_v3(client: RawClient) -> None:
    response = client.request(api_versions_request(3))
    assert response.throttle_time.total_seconds() == 0
    keys = [k.api_key for k in response.api_keys]
    assert len(keys) == len(set(keys)), "an API key is advertised twice"
