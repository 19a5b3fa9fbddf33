"""SCRAM credentials as Kafka stores them (ScramCredentialUtils, ScramFormatter): salt, stored
key and server key, never the password, in the text form
`salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>` that ZooKeeper's
/config/users/<user> holds per mechanism."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """Kafka's ScramMechanism: the admin API's type byte and the accepted iterations."""

    name: str
    type: int
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE = {m.type: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """What AlterUserScramCredentials stores of the client's salted password
        (RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")))."""
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(
            salt,
            mechanism.digest(client_key),
            mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        )

    @classmethod
    def from_password(
        cls, mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
    ) -> ScramCredential:
        salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_string(self) -> str:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        return (
            f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
            f"server_key={b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        props: dict[str, Any] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError(f"Credentials not valid: {text}")
            props[key] = value
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(f"Credentials not valid: {text}")
        return cls(
            base64.b64decode(props["salt"]),
            base64.b64decode(props["stored_key"]),
            base64.b64decode(props["server_key"]),
            int(props["iterations"]),
        )
