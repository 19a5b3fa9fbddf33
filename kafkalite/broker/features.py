"""The broker's feature levels (KIP-584), as ApiVersions advertises them and UpdateFeatures
checks them.

`metadata.version` follows Kafka 4.4 (supported 7-33, finalized at 33), whose request ranges
kafkalite serves, `group.version` 1 (KIP-848 consumer groups, served:
ConsumerGroupHeartbeat), `share.version` 2 (1: KIP-932 share groups, served:
ShareGroupHeartbeat, ShareFetch, ShareAcknowledge; 2: their dead-letter topics, KIP-1191) and
`transaction.version` 1 (KIP-890 part 1: produce verification; Kafka 4 finalizes 2,
transactions v2 with per-transaction epoch bumps, which kafkalite does not serve yet, so
clients keep to the v1 protocol). The other features Kafka 4 finalizes name protocols
kafkalite does not implement yet (streams groups, eligible leader replicas, KRaft), so they
are supported at level 0 only; a level-0 feature is not finalized, as in Kafka. kafkalite
never changes a level: an update to the current level is a no-op, any other is refused with
Kafka's wording.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

METADATA_VERSION = "metadata.version"
# Kafka's metadata log offset is the features' epoch; kafkalite's levels never change.
FINALIZED_EPOCH = 0
_ALL_FAILED = "The update failed for all features since the following feature had an error: "

# Upgrade types of UpdateFeatures v1+ (v0's allow_downgrade maps to SAFE_DOWNGRADE).
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_version: int
    max_version: int
    finalized: int  # 0: not finalized


FEATURES: tuple[Feature, ...] = (
    Feature("eligible.leader.replicas.version", 0, 0, 0),
    Feature("group.version", 0, 1, 1),
    Feature("kraft.version", 0, 0, 0),
    Feature(METADATA_VERSION, 7, 33, 33),
    Feature("share.version", 0, 2, 2),
    Feature("streams.version", 0, 0, 0),
    Feature("transaction.version", 0, 1, 1),
)
_BY_NAME = {feature.name: feature for feature in FEATURES}


def finalized_level(name: str) -> int:
    """The finalized level of `name` (0: not finalized)."""
    feature = _BY_NAME.get(name)
    return feature.finalized if feature is not None else 0


def finalized() -> tuple[Feature, ...]:
    return tuple(feature for feature in FEATURES if feature.finalized > 0)


def refusal(node_id: int, name: str, level: int, upgrade_type: int) -> str | None:
    """Why the update of `name` to `level` is refused (Kafka's words), None when it is a no-op."""
    feature = _BY_NAME.get(name)
    if feature is None:
        reason = f"Local controller {node_id} does not support this feature."
    elif not feature.min_version <= level <= feature.max_version:
        reason = (
            f"Local controller {node_id} only supports versions "
            f"{feature.min_version}-{feature.max_version}"
        )
    elif level == feature.finalized:
        return None
    elif level < feature.finalized and upgrade_type == UPGRADE:
        reason = (
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade."
        )
    elif level > feature.finalized and upgrade_type != UPGRADE:
        reason = "Can't downgrade to a newer version."
    else:
        reason = f"kafkalite keeps {name} at level {feature.finalized}."
    return f"Invalid update version {level} for feature {name}. {reason}"


def check_updates(
    node_id: int, updates: list[tuple[str, int, int]]
) -> tuple[ErrorCode, str | None]:
    """The whole request's answer: Kafka applies feature updates atomically, so the first
    refused feature fails them all with INVALID_UPDATE_VERSION."""
    for name, level, upgrade_type in updates:
        reason = refusal(node_id, name, level, upgrade_type)
        if reason is not None:
            return ErrorCode.invalid_update_version, _ALL_FAILED + reason
    return ErrorCode.none, None
