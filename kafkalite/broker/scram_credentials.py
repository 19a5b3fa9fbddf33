"""SCRAM credentials of users: AlterUserScramCredentials and DescribeUserScramCredentials with
Kafka's per-user errors (its ScramControlManager and ScramImage), and the lookup the SASL/SCRAM
server authenticates against.

Credentials are kept as Kafka keeps them (salt, stored key, server key, iterations: never the
password; security/scram_credential.py), by the metadata store: on a single node in its
metadata file. A cluster would keep them in ZooKeeper's /config/users/<user>, which kafkalite
does not do yet: there every alteration is refused with UNSUPPORTED_VERSION, as Kafka refuses
SCRAM where its metadata cannot hold it.
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
NOT_STORED = "kafkalite keeps SCRAM credentials on a single node only (not yet in ZooKeeper)"


class ScramCredentialStore(Protocol):
    def scram_credentials(self) -> Mapping[str, Mapping[str, str]]:
        """user -> mechanism name -> credential text (ScramCredentialUtils' form)."""
        ...

    def set_scram_credentials(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        """Replace each named user's credentials (none: the user goes), durably."""
        ...


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
        user when none is named)."""
        if self._store is None:
            return ErrorCode.unsupported_version, NOT_STORED, []
        stored = self._store.scram_credentials()
        named = list(users or stored)
        results = []
        for user in dict.fromkeys(named):
            if named.count(user) > 1:
                results.append(
                    UserResult(user, ErrorCode.duplicate_resource, DESCRIBE_DUPLICATE + user)
                )
            elif not stored.get(user):
                results.append(
                    UserResult(user, ErrorCode.resource_not_found, DESCRIBE_MISSING + user)
                )
            else:
                infos = tuple(
                    (MECHANISMS[name].type, ScramCredential.from_string(text).iterations)
                    for name, text in sorted(
                        stored[user].items(), key=lambda m: MECHANISMS[m[0]].type
                    )
                )
                results.append(UserResult(user, credentials=infos))
        return ErrorCode.none, None, results

    def alter(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> list[UserResult]:
        """Kafka's alterCredentials: a user altered twice in one request fails as a whole."""
        if self._store is None:
            users = dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions])
            return [UserResult(u, ErrorCode.unsupported_version, NOT_STORED) for u in users]
        stored = self._store.scram_credentials()
        to_delete: dict[str, Deletion] = {}
        to_upsert: dict[str, Upsertion] = {}
        errors: dict[str, UserResult] = {}
        for deletion in deletions:
            user = deletion.user
            if user in errors:
                continue
            if to_delete.pop(user, None) is not None:
                errors[user] = UserResult(user, ErrorCode.duplicate_resource, DUPLICATE_ALTERATION)
            elif (error := _check_deletion(deletion, stored)) is not None:
                errors[user] = error
            else:
                to_delete[user] = deletion
        for upsertion in upsertions:
            user = upsertion.user
            if user in errors:
                continue
            if to_delete.pop(user, None) is not None or to_upsert.pop(user, None) is not None:
                errors[user] = UserResult(user, ErrorCode.duplicate_resource, DUPLICATE_ALTERATION)
            elif (error := _check_upsertion(upsertion)) is not None:
                errors[user] = error
            else:
                to_upsert[user] = upsertion
        self._apply(stored, to_delete, to_upsert)
        return [UserResult(user) for user in (*to_delete, *to_upsert)] + list(errors.values())

    def _apply(
        self,
        stored: Mapping[str, Mapping[str, str]],
        to_delete: Mapping[str, Deletion],
        to_upsert: Mapping[str, Upsertion],
    ) -> None:
        assert self._store is not None
        changes: dict[str, dict[str, str]] = {}
        for user, deletion in to_delete.items():
            changes[user] = dict(stored.get(user, {}))
            changes[user].pop(BY_TYPE[deletion.mechanism].name, None)
        for user, upsertion in to_upsert.items():
            mechanism = BY_TYPE[upsertion.mechanism]
            credential = ScramCredential.from_salted_password(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
            )
            changes[user] = {**stored.get(user, {}), mechanism.name: credential.to_string()}
        if changes:
            self._store.set_scram_credentials(changes)


def _check_user_and_mechanism(user: str, mechanism: int) -> UserResult | None:
    if not user:
        return UserResult(user, ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in BY_TYPE:
        return UserResult(user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


def _check_deletion(
    deletion: Deletion, stored: Mapping[str, Mapping[str, str]]
) -> UserResult | None:
    error = _check_user_and_mechanism(deletion.user, deletion.mechanism)
    if error is not None:
        return error
    if BY_TYPE[deletion.mechanism].name not in stored.get(deletion.user, {}):
        return UserResult(
            deletion.user,
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        )
    return None


def _check_upsertion(upsertion: Upsertion) -> UserResult | None:
    error = _check_user_and_mechanism(upsertion.user, upsertion.mechanism)
    if error is not None:
        return error
    mechanism = BY_TYPE[upsertion.mechanism]
    if upsertion.iterations < mechanism.min_iterations:
        return UserResult(upsertion.user, ErrorCode.unacceptable_credential, "Too few iterations")
    if upsertion.iterations > mechanism.max_iterations:
        return UserResult(upsertion.user, ErrorCode.unacceptable_credential, "Too many iterations")
    return None
