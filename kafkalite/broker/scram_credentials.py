"""SCRAM credentials of users: AlterUserScramCredentials and DescribeUserScramCredentials with
Kafka's per-user errors as its ZooKeeper-era ZkAdminManager gives them (a user may change
several mechanisms in one request: `kafka-configs --add-config
'SCRAM-SHA-256=[...],SCRAM-SHA-512=[...]'`), and the lookup the SASL/SCRAM server
authenticates against.

Credentials are kept as Kafka keeps them (salt, stored key, server key, iterations: never the
password; security/scram_credential.py) by a ScramCredentialStore: on a single node the
metadata file (SingleNodeScramStore), in a cluster ZooKeeper's `/config/users/<user>` with
Kafka's `/config/changes` notification (cluster/zk_scram_store.py), so that a user created
on one broker logs in on every other. Without a store every alteration is refused with
UNSUPPORTED_VERSION, as Kafka refuses SCRAM where its metadata cannot hold it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from kafkalite.security.scram_credential import BY_TYPE, MECHANISMS, ScramCredential

DUPLICATE_ALTERATION = "A user credential cannot be altered twice in the same request"
DESCRIBE_DUPLICATE = (
    "Cannot describe SCRAM credentials for the same user twice in a single request: "
)
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
MISSING_DELETION = "Attempt to delete a user credential that does not exist"
EMPTY_USER = "Username must not be empty"
NOT_STORED = "This broker has no store for SCRAM credentials"


class ScramCredentialStore(Protocol):
    def scram_credentials(self) -> Mapping[str, Mapping[str, str]]:
        """user -> mechanism name -> credential text (ScramCredentialUtils' form)."""
        ...

    async def set_scram_credentials(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        """Replace each named user's credentials (none: the user goes), durably."""
        ...


class SingleNodeCredentials(Protocol):
    def scram_credentials(self) -> Mapping[str, Mapping[str, str]]: ...

    def set_scram_credentials(self, changes: Mapping[str, Mapping[str, str]]) -> None: ...


@dataclass(frozen=True, slots=True)
class SingleNodeScramStore:
    """A single node's credentials: in its metadata file (broker/metadata_store.py)."""

    metadata: SingleNodeCredentials

    def scram_credentials(self) -> Mapping[str, Mapping[str, str]]:
        return self.metadata.scram_credentials()

    async def set_scram_credentials(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        self.metadata.set_scram_credentials(changes)


@dataclass(frozen=True, slots=True)
class Deletion:
    user: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = field(default=())  # (mechanism type, iterations)


class ScramCredentials:
    def __init__(self, store: ScramCredentialStore | None) -> None:
        self._store = store

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        if self._store is None:
            return None
        text = self._store.scram_credentials().get(user, {}).get(mechanism)
        return ScramCredential.from_string(text) if text is not None else None

    def describe(
        self, users: Sequence[str] | None
    ) -> tuple[ErrorCode, str | None, list[UserResult]]:
        """The top-level error and message, and one result per distinct user asked for (every
        user with credentials, sorted, when none is named)."""
        if self._store is None:
            return ErrorCode.unsupported_version, NOT_STORED, []
        stored = self._store.scram_credentials()
        if not users:
            return ErrorCode.none, None, [self._described(user, stored) for user in sorted(stored)]
        results = []
        for user in dict.fromkeys(users):
            if not user:
                results.append(UserResult(user, ErrorCode.resource_not_found, EMPTY_USER))
            elif users.count(user) > 1:
                message = DESCRIBE_DUPLICATE + user
                results.append(UserResult(user, ErrorCode.duplicate_resource, message))
            elif not stored.get(user):
                message = DESCRIBE_MISSING + user
                results.append(UserResult(user, ErrorCode.resource_not_found, message))
            else:
                results.append(self._described(user, stored))
        return ErrorCode.none, None, results

    @staticmethod
    def _described(user: str, stored: Mapping[str, Mapping[str, str]]) -> UserResult:
        infos = tuple(
            (mechanism.type, ScramCredential.from_string(stored[user][name]).iterations)
            for name, mechanism in MECHANISMS.items()
            if name in stored[user]
        )
        return UserResult(user, credentials=infos)

    async def alter(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> list[UserResult]:
        """Kafka's ZkAdminManager.alterUserScramCredentials: a user with any refused change
        keeps its credentials; results list refusals first (illegal, duplicate, missing),
        then the altered users."""
        changes: list[Deletion | Upsertion] = [*deletions, *upsertions]
        if self._store is None:
            users = dict.fromkeys(change.user for change in changes)
            return [UserResult(u, ErrorCode.unsupported_version, NOT_STORED) for u in users]
        stored = self._store.scram_credentials()
        refused: dict[str, UserResult] = {}
        for change in changes:  # an upsertion's reason wins over a deletion's, as in Kafka
            if (illegal := _illegal(change)) is not None:
                refused[change.user] = illegal
        pairs = [(c.user, c.mechanism) for c in changes if c.user not in refused]
        for user, mechanism in pairs:
            if pairs.count((user, mechanism)) > 1 and user not in refused:
                refused[user] = UserResult(user, ErrorCode.duplicate_resource, DUPLICATE_ALTERATION)
        for deletion in deletions:
            name = BY_TYPE.get(deletion.mechanism)
            missing = name is not None and name.name not in stored.get(deletion.user, {})
            if deletion.user not in refused and missing:
                refused[deletion.user] = UserResult(
                    deletion.user, ErrorCode.resource_not_found, MISSING_DELETION
                )
        altered = [user for user in dict.fromkeys(c.user for c in changes) if user not in refused]
        await self._apply(stored, altered, deletions, upsertions)
        return [*refused.values(), *(UserResult(user) for user in altered)]

    async def _apply(
        self,
        stored: Mapping[str, Mapping[str, str]],
        users: Sequence[str],
        deletions: Sequence[Deletion],
        upsertions: Sequence[Upsertion],
    ) -> None:
        """Deletions, then upsertions, of the users whose changes were all accepted."""
        assert self._store is not None
        changes = {user: dict(stored.get(user, {})) for user in users}
        for deletion in deletions:
            if deletion.user in changes:
                changes[deletion.user].pop(BY_TYPE[deletion.mechanism].name, None)
        for upsertion in upsertions:
            if upsertion.user in changes:
                mechanism = BY_TYPE[upsertion.mechanism]
                credential = ScramCredential.from_salted_password(
                    mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
                )
                changes[upsertion.user][mechanism.name] = credential.to_string()
        if changes:
            await self._store.set_scram_credentials(changes)


def _illegal(change: Deletion | Upsertion) -> UserResult | None:
    if not change.user:
        return UserResult(change.user, ErrorCode.unacceptable_credential, EMPTY_USER)
    mechanism = BY_TYPE.get(change.mechanism)
    if mechanism is None:
        return UserResult(
            change.user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
        )
    if isinstance(change, Upsertion):
        if change.iterations > mechanism.max_iterations:
            return UserResult(change.user, ErrorCode.unacceptable_credential, "Too many iterations")
        if change.iterations < mechanism.min_iterations:
            return UserResult(change.user, ErrorCode.unacceptable_credential, "Too few iterations")
    return None
