"""Features: ApiVersions advertises them (v3+), UpdateFeatures refuses any change of level."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import api_versions, update_features
from kafkalite.apis.registry import HANDLERS
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make

from .harness import call

ALL_FAILED = "The update failed for all features since the following feature had an error: "


def build_api_versions(m: Any) -> Any:
    return make(m.ApiVersionsRequest, client_software_name="t", client_software_version="1")


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_carries_the_features(broker: Broker, version: int) -> None:
    response = call(broker, HANDLERS[api_versions.API_KEY], version, build_api_versions)
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert supported == {
        "eligible.leader.replicas.version": (0, 0),
        "group.version": (0, 1),
        "kraft.version": (0, 0),
        "metadata.version": (7, 33),
        "share.version": (0, 2),
        "streams.version": (0, 0),
        "transaction.version": (0, 1),
    }
    finalized = [
        (f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features
    ]
    assert finalized == [
        ("group.version", 1, 1),
        ("metadata.version", 33, 33),
        ("share.version", 2, 2),
        ("transaction.version", 1, 1),
    ]
    assert response.finalized_features_epoch == 0


def update(broker: Broker, version: int, *features: tuple[str, int, int]) -> Any:
    def build(m: Any) -> Any:
        keys = tuple(
            make(
                m.FeatureUpdateKey,
                feature=name,
                max_version_level=level,
                upgrade_type=upgrade_type,
                allow_downgrade=upgrade_type != 1,
            )
            for name, level, upgrade_type in features
        )
        return make(m.UpdateFeaturesRequest, timeout_ms=60_000, feature_updates=keys)

    return call(broker, update_features.API, version, build)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_an_update_to_the_current_level_succeeds(broker: Broker, version: int) -> None:
    response = update(broker, version, ("metadata.version", 33, 1), ("streams.version", 0, 2))
    assert (response.error_code, response.error_message) == (ErrorCode.none, None)
    if version < 2:
        assert [(r.feature, r.error_code, r.error_message) for r in response.results] == [
            ("metadata.version", ErrorCode.none, "NONE"),
            ("streams.version", ErrorCode.none, "NONE"),
        ]


@pytest.mark.parametrize(
    ("feature", "reason"),
    [
        (("transaction.version", 2, 1), "Local controller 0 only supports versions 0-1"),
        (("nonsense", 1, 1), "Local controller 0 does not support this feature."),
        (("metadata.version", 20, 2), "kafkalite keeps metadata.version at level 33."),
        (
            ("metadata.version", 20, 1),
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade.",
        ),
    ],
)
@pytest.mark.parametrize("version", [0, 1, 2])
def test_any_other_level_fails_the_whole_request(
    broker: Broker, version: int, feature: tuple[str, int, int], reason: str
) -> None:
    response = update(broker, version, ("metadata.version", 33, 1), feature)
    name, level, _ = feature
    assert (response.error_code, response.error_message) == (
        ErrorCode.invalid_update_version,
        f"{ALL_FAILED}Invalid update version {level} for feature {name}. {reason}",
    )
    assert getattr(response, "results", ()) == ()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_api_versions_before_v3_has_no_features(broker: Broker, version: int) -> None:
    response = call(
        broker, HANDLERS[api_versions.API_KEY], version, lambda m: make(m.ApiVersionsRequest)
    )
    assert response.error_code == ErrorCode.none
    assert not hasattr(response, "supported_features")
