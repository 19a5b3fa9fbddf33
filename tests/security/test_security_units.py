"""The sans-IO parts of kafkalite/security and the SCRAM credential store: JAAS parsing,
RFC 2253 principals (also from a real TLS handshake), SCRAM credentials as Kafka stores
them, Alter/DescribeUserScramCredentials' per-user errors, the SASL state machine driven
frame by frame, and the configs Kafka (or kafkalite) refuses."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import scramp
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from kafkalite.apis.api_versions import api_versions_response
from kafkalite.apis.registry import HANDLERS
from kafkalite.broker.cluster_metadata import BrokerInfo
from kafkalite.broker.metadata_store import SingleNodeMetadata
from kafkalite.broker.scram_credentials import (
    Deletion,
    ScramCredentials,
    SingleNodeScramStore,
    Upsertion,
    UserResult,
)
from kafkalite.config import ConfigError, build_config, is_password
from kafkalite.protocol.codec import DecodedRequest, decode_request
from kafkalite.security.jaas import JaasConfigError, parse_jaas_config
from kafkalite.security.listener_security import SaslSettings, listener_security
from kafkalite.security.oauthbearer import (
    IllegalToken,
    OAuthBearerServer,
    ValidatorOptions,
    validate_unsecured_jws,
    validator_options,
)
from kafkalite.security.principal import ANONYMOUS, KafkaPrincipal, rfc2253, ssl_principal
from kafkalite.security.reauthentication import Reauthentication
from kafkalite.security.sasl_authenticator import SaslServerAuthenticator, SaslState, Session
from kafkalite.security.sasl_server import SaslAuthenticationError, SaslError
from kafkalite.security.scram_credential import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from kafkalite.security.ssl_context import server_ssl_context
from kafkalite.security.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper, parse_rules
from protocol_tests.raw_client import (
    api_versions_request,
    build,
    decode_response,
    encode_request,
    metadata_request,
)
from protocol_tests.raw_client import response_class as response_cls
from tests.security.conftest import JAAS, Pki, secure_overrides

NOW_MS = 1_800_000_000_000

# -- JAAS --------------------------------------------------------------------------------------


def test_jaas_config_as_kafka_parses_it() -> None:
    (module,) = parse_jaas_config(JAAS)
    assert module.name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert module.flag == "required"
    assert module.options == {
        "username": "admin",
        "password": "admin-secret",
        "user_alice": "alice-secret",
        "user_admin": "admin-secret",
    }
    (quoted,) = parse_jaas_config('m.Login required a="x \\"y\\" ;z" b=plain;')
    assert quoted.options == {"a": 'x "y" ;z', "b": "plain"}


@pytest.mark.parametrize("text", ["", "m.Login", "m.Login maybe a=b;", 'm.Login required a="b"'])
def test_malformed_jaas_config(text: str) -> None:
    with pytest.raises(JaasConfigError):
        parse_jaas_config(text)


# -- principals ----------------------------------------------------------------------------------


def test_rfc2253_is_most_specific_first_with_escapes() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Acme, Inc."),),
        (("organizationalUnitName", "eng"), ("organizationalUnitName", "ops")),
        (("commonName", "#alice "),),
        (("emailAddress", "a@b.c"),),
    )
    assert rfc2253(subject) == (
        "1.2.840.113549.1.9.1=#16056140622e63,CN=\\#alice\\ ,OU=eng+OU=ops,O=Acme\\, Inc.,C=US"
    )
    assert ssl_principal(None) == ANONYMOUS
    assert ssl_principal({}) == ANONYMOUS


def _server_context(pki: Pki, client_auth: str) -> Any:
    config = build_config({**secure_overrides(pki), "ssl.client.auth": client_auth})
    return server_ssl_context(config, "SSL", client_auth)


def _client_context(pki: Pki, with_certificate: bool) -> Any:
    import ssl

    context = ssl.create_default_context(cafile=str(pki.ca_file))
    if with_certificate:
        context.load_cert_chain(pki.client_cert_file, pki.client_key_file)
    return context


async def _handshake(pki: Pki, client_auth: str, with_certificate: bool) -> dict[str, Any] | None:
    server_end, client_end = trio.testing.memory_stream_pair()
    server = trio.SSLStream(server_end, _server_context(pki, client_auth), server_side=True)
    client = trio.SSLStream(
        client_end, _client_context(pki, with_certificate), server_hostname="localhost"
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.do_handshake)
        await server.do_handshake()
    return server.getpeercert()


def test_principal_from_a_client_certificate(pki: Pki) -> None:
    certificate = trio.run(_handshake, pki, "requested", True)
    assert str(ssl_principal(certificate)) == "User:CN=client,OU=eng,O=Acme\\, Inc."
    assert ssl_principal(trio.run(_handshake, pki, "requested", False)) == ANONYMOUS


def test_required_client_certificate_refuses_a_client_without_one(pki: Pki) -> None:
    with pytest.raises(BaseException) as caught:  # the nursery's group of both ends' errors
        trio.run(_handshake, pki, "required", False)
    assert "BrokenResourceError" in repr(caught.value)


# -- SCRAM credentials ---------------------------------------------------------------------------


def test_credential_as_kafka_stores_it_and_as_scramp_derives_it() -> None:
    salt = b"0123456789abcdef"
    credential = ScramCredential.from_password(SCRAM_SHA_512, "secret", salt, 4096)
    expected = scramp.ScramMechanism("SCRAM-SHA-512").make_auth_info("secret", 4096, salt)
    assert (credential.salt, credential.stored_key, credential.server_key) == expected[:3]
    text = credential.to_string()
    assert text.startswith(f"salt={base64.b64encode(salt).decode()},stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_string(text) == credential
    with pytest.raises(ValueError, match="Credentials not valid"):
        ScramCredential.from_string("salt=AA==,iterations=4096")


def _upsertion(user: str, mechanism: int = 1, iterations: int = 4096) -> Upsertion:
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, iterations)
    return Upsertion(user, mechanism, iterations, salt, salted)


def _store(tmp_path: Path) -> SingleNodeScramStore:
    metadata = SingleNodeMetadata(tmp_path, BrokerInfo(0, ()))
    metadata.load(0, None)
    return SingleNodeScramStore(metadata)


def alter(
    scram: ScramCredentials, deletions: list[Deletion], upsertions: list[Upsertion]
) -> list[UserResult]:
    return trio.run(scram.alter, deletions, upsertions)


def test_alter_user_scram_credentials_per_user_errors(tmp_path: Path) -> None:
    scram = ScramCredentials(_store(tmp_path))
    alter(scram, [], [_upsertion("dup")])
    results = alter(
        scram,
        [Deletion("ghost", 1), Deletion("dup", 1), Deletion("dup", 2), Deletion("", 1)],
        [
            _upsertion("ok"),
            _upsertion("low", iterations=4095),
            _upsertion("high", iterations=16385),
            _upsertion("mech", mechanism=3),
            _upsertion("dup"),
        ],
    )
    assert [(r.user, r.error, r.message) for r in results] == [
        ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
        ("low", ErrorCode.unacceptable_credential, "Too few iterations"),
        ("high", ErrorCode.unacceptable_credential, "Too many iterations"),
        ("mech", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        (
            "dup",
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        ),
        (
            "ghost",
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        ),
        ("ok", ErrorCode.none, None),
    ]
    assert scram.credential("ok", "SCRAM-SHA-256") is not None
    assert scram.credential("dup", "SCRAM-SHA-256") is not None  # a refused user keeps its own


def test_one_request_may_change_several_mechanisms_of_a_user(tmp_path: Path) -> None:
    """kafka-configs --add-config 'SCRAM-SHA-256=[...],SCRAM-SHA-512=[...]' (ZooKeeper-era
    Kafka keys duplicates by user and mechanism)."""
    scram = ScramCredentials(_store(tmp_path))
    results = alter(scram, [], [_upsertion("bob", 1), _upsertion("bob", 2)])
    assert [(r.user, r.error) for r in results] == [("bob", ErrorCode.none)]
    results = alter(scram, [Deletion("bob", 2)], [_upsertion("bob", 1, iterations=8192)])
    assert [(r.user, r.error) for r in results] == [("bob", ErrorCode.none)]
    assert scram.describe(["bob"])[2][0].credentials == ((1, 8192),)


def test_describe_user_scram_credentials_and_restart(tmp_path: Path) -> None:
    scram = ScramCredentials(_store(tmp_path))
    alter(scram, [], [_upsertion("u1"), _upsertion("u2", mechanism=2, iterations=8192)])
    alter(scram, [], [_upsertion("u1", mechanism=2)])
    error, _, results = scram.describe(["u1", "ghost", "u2", "u2", ""])
    assert error == ErrorCode.none
    assert [(r.user, r.error, r.message, r.credentials) for r in results] == [
        ("u1", ErrorCode.none, None, ((1, 4096), (2, 4096))),
        (
            "ghost",
            ErrorCode.resource_not_found,
            "Attempt to describe a user credential that does not exist: ghost",
            (),
        ),
        (
            "u2",
            ErrorCode.duplicate_resource,
            "Cannot describe SCRAM credentials for the same user twice in a single request: u2",
            (),
        ),
        ("", ErrorCode.resource_not_found, "Username must not be empty", ()),
    ]
    reopened = ScramCredentials(_store(tmp_path))  # kept in the metadata file
    assert [r.user for r in reopened.describe(None)[2]] == ["u1", "u2"]
    assert alter(reopened, [Deletion("u1", 1)], [])[0].error == ErrorCode.none
    assert [r.credentials for r in reopened.describe(["u1"])[2]] == [((2, 4096),)]


def test_without_a_store_scram_alterations_are_refused() -> None:
    scram = ScramCredentials(None)
    assert [r.error for r in alter(scram, [], [_upsertion("u")])] == [ErrorCode.unsupported_version]
    assert scram.describe(None)[0] == ErrorCode.unsupported_version


# -- the SASL state machine ----------------------------------------------------------------------


def _authenticator(mechanisms: tuple[str, ...], credential: ScramCredential | None = None) -> Any:
    return SaslServerAuthenticator(
        SaslSettings(mechanisms, {"alice": "alice-secret"}),
        HANDLERS,
        lambda version, error: api_versions_response(HANDLERS, version, error),
        lambda user, mechanism: credential if user == "bob" else None,
        lambda: NOW_MS,
    )


def _exchange(authenticator: Any, request: Any) -> Any:
    response = authenticator.receive(encode_request(request, 7))
    if response is None:
        return None
    api_key, version = type(request).__api_key__, type(request).__version__
    _, body = decode_response(response[4:], response_cls(api_key, version))
    return body


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_scramp_client(mechanism: str) -> None:
    scram = SCRAM_SHA_256 if mechanism == "SCRAM-SHA-256" else SCRAM_SHA_512
    credential = ScramCredential.from_password(scram, "bob-secret", os.urandom(16), 4096)
    authenticator = _authenticator(("PLAIN", mechanism), credential)
    assert _exchange(authenticator, api_versions_request()).error_code == ErrorCode.none
    assert authenticator.state is SaslState.HANDSHAKE_REQUEST
    handshake = build(17, 1, "SaslHandshakeRequest", mechanism=mechanism)
    assert _exchange(authenticator, handshake).error_code == ErrorCode.none
    client = scramp.ScramClient([mechanism], "bob", "bob-secret")
    first = build(36, 2, "SaslAuthenticateRequest", auth_bytes=client.get_client_first().encode())
    client.set_server_first(_exchange(authenticator, first).auth_bytes.decode())
    assert authenticator.state is SaslState.AUTHENTICATE
    final = build(36, 2, "SaslAuthenticateRequest", auth_bytes=client.get_client_final().encode())
    client.set_server_final(_exchange(authenticator, final).auth_bytes.decode())  # verifies it
    assert authenticator.state is SaslState.COMPLETE
    assert str(authenticator.principal) == "User:bob"


def test_scram_client_final_nonce_ending_with_the_servers_is_accepted() -> None:
    """As Kafka's ScramSaslServer (`nonce().endsWith(serverFirstMessage.nonce())`): librdkafka
    2.0.x (Debian's kcat) sends its own nonce again before the combined one."""
    credential = ScramCredential.from_password(SCRAM_SHA_512, "bob-secret", os.urandom(16), 4096)
    authenticator = _authenticator(("SCRAM-SHA-512",), credential)
    _exchange(authenticator, build(17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-512"))
    client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "bob-secret")
    first = build(36, 2, "SaslAuthenticateRequest", auth_bytes=client.get_client_first().encode())
    client.set_server_first(_exchange(authenticator, first).auth_bytes.decode())
    # what librdkafka 2.0.2 puts in its client-final: r=<its nonce><the combined nonce>
    client.nonce = type(client.nonce)(str(client.c_nonce) + str(client.nonce))
    final = build(36, 2, "SaslAuthenticateRequest", auth_bytes=client.get_client_final().encode())
    response = _exchange(authenticator, final)
    assert response.error_code == ErrorCode.none
    client.set_server_final(response.auth_bytes.decode())  # the server's signature verifies
    assert authenticator.state is SaslState.COMPLETE


def test_scram_client_final_with_another_nonce_fails() -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_256, "bob-secret", os.urandom(16), 4096)
    authenticator = _authenticator(("SCRAM-SHA-256",), credential)
    _exchange(authenticator, build(17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-256"))
    client = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "bob-secret")
    first = build(36, 2, "SaslAuthenticateRequest", auth_bytes=client.get_client_first().encode())
    client.set_server_first(_exchange(authenticator, first).auth_bytes.decode())
    client.nonce = type(client.nonce)(str(client.nonce) + "x")  # not ending with the server's
    final = build(36, 2, "SaslAuthenticateRequest", auth_bytes=client.get_client_final().encode())
    response = _exchange(authenticator, final)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert authenticator.state is SaslState.FAILED


def test_scram_wrong_proof_fails() -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_256, "bob-secret", os.urandom(16), 4096)
    authenticator = _authenticator(("SCRAM-SHA-256",), credential)
    _exchange(authenticator, build(17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-256"))
    client = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "wrong")
    first = build(36, 2, "SaslAuthenticateRequest", auth_bytes=client.get_client_first().encode())
    client.set_server_first(_exchange(authenticator, first).auth_bytes.decode())
    final = build(36, 2, "SaslAuthenticateRequest", auth_bytes=client.get_client_final().encode())
    response = _exchange(authenticator, final)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert (authenticator.state, authenticator.delay_close) == (SaslState.FAILED, True)


def test_scram_authorization_id_must_be_the_user() -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_256, "pw", os.urandom(16), 4096)
    authenticator = _authenticator(("SCRAM-SHA-256",), credential)
    _exchange(authenticator, build(17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-256"))
    first = build(36, 2, "SaslAuthenticateRequest", auth_bytes=b"n,a=admin,n=bob,r=abcdefgh")
    response = _exchange(authenticator, first)
    assert response.error_message == (
        "Authentication failed: Client requested an authorization id that is different from"
        " username"
    )


def test_garbage_first_packet_fails_as_unsupported_gssapi() -> None:
    authenticator = _authenticator(("PLAIN",))
    assert authenticator.receive(b"\x60\x01") is None
    assert (authenticator.state, authenticator.delay_close) == (SaslState.FAILED, True)


# -- configuration ------------------------------------------------------------------------------


def test_listener_overrides_and_passwords(pki: Pki) -> None:
    config = build_config(secure_overrides(pki))
    assert config.listener_str("SSL", "ssl.client.auth") == "requested"
    assert config.listener_str("SASL_SSL", "ssl.client.auth") == "none"
    assert listener_security(config, "SASL_SSL").ssl_context.verify_mode.name == "CERT_NONE"
    assert listener_security(config, "SSL").ssl_context.verify_mode.name == "CERT_OPTIONAL"
    assert listener_security(config, "PLAINTEXT").ssl_context is None
    settings = listener_security(config, "SASL_PLAINTEXT").sasl
    assert settings is not None and settings.plain_users["alice"] == "alice-secret"
    assert is_password("listener.name.sasl_ssl.plain.sasl.jaas.config")
    assert is_password("ssl.key.password") and not is_password("ssl.keystore.location")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"listeners": "PLAINTEXT://:0,PLAINTEXT://:1"}, "unique"),
        ({"listeners": "INTERNAL://:0"}, "not in listener.security.protocol.map"),
        (
            {"listeners": "INTERNAL://:0", "listener.security.protocol.map": "INTERNAL:TLS"},
            "is not one of",
        ),
        ({"listener.name.ssl.ssl.bogus": "x"}, "unknown property"),
        ({"listener.name.ssl.log.dirs": "x"}, "unknown property"),
        ({"ssl.client.auth": "maybe"}, "expected one of"),
    ],
)
def test_configs_refused_at_startup(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI not supported by kafkalite"),
        ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "broken"}, "expected"),
        ({"ssl.keystore.type": "JKS"}, "JKS is not supported"),
        ({"ssl.keystore.location": "/nonexistent.pem"}, "cannot set up TLS"),
        ({"ssl.enabled.protocols": "SSLv3"}, "SSLv3 is not one of"),
    ],
)
def test_listener_security_refused_at_startup(
    pki: Pki, overrides: dict[str, str], message: str
) -> None:
    config = build_config({**secure_overrides(pki), **overrides})
    with pytest.raises(ConfigError, match=message):
        for listener in config.listeners:
            listener_security(config, listener.name)


# -- OAUTHBEARER (unsecured JWS) ---------------------------------------------------------------


def _jws(claims: dict[str, Any], header: dict[str, Any] | None = None, signature: str = "") -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part(header or {'alg': 'none'})}.{part(claims)}.{signature}"


def _initial_response(token: str, authzid: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01\x01".encode()


VALID = {"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000, "scope": "kafka"}


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (_jws({**VALID, "exp": NOW_MS / 1000}), "was on or after the Expiration Time"),
        (_jws({k: v for k, v in VALID.items() if k != "exp"}), "No expiration time in JWT"),
        (_jws({**VALID, "exp": "soon"}), "'exp' claim was not of type Number"),
        (_jws({**VALID, "sub": " "}), "No principal name in JWT claim: sub"),
        (_jws({**VALID, "iat": NOW_MS / 1000 + 1}), "Issued At value"),
        (_jws(VALID, {"alg": "HS256"}), "must have 'none' for an algorithm"),
        (_jws(VALID, signature="c2ln"), "must not contain a digital signature"),
        ("a.b", "3 dot-separated"),
        ("a..b", "contains '..'"),
    ],
)
def test_unsecured_jws_refusals(token: str, reason: str) -> None:
    with pytest.raises(IllegalToken, match=re.escape(reason)):
        validate_unsecured_jws(token, ValidatorOptions(), NOW_MS)


def test_unsecured_jws_options() -> None:
    options = validator_options(
        parse_jaas_config(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
            ' unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorRequiredScope="a b"'
            ' unsecuredValidatorAllowableClockSkewMs="1000";'
        )
    )
    assert options == ValidatorOptions("user", "scope", ("a", "b"), 1000)
    token = _jws({"user": "bob", "exp": NOW_MS / 1000, "scope": ["a", "b", "c"]})
    valid = validate_unsecured_jws(token, options, NOW_MS)  # within the clock skew
    assert (valid.principal, valid.lifetime_ms) == ("bob", NOW_MS)
    with pytest.raises(IllegalToken) as refused:
        validate_unsecured_jws(_jws({**VALID, "user": "bob", "scope": "a"}), options, NOW_MS)
    assert refused.value.scope == "[a, b]"


def test_oauthbearer_exchange_and_two_round_failure() -> None:
    server = OAuthBearerServer(ValidatorOptions(required_scope=("kafka",)), lambda: NOW_MS)
    assert server.evaluate_response(_initial_response(_jws(VALID))) == b""
    assert (server.complete, server.authorization_id) == (True, "alice")
    failing = OAuthBearerServer(ValidatorOptions(), lambda: NOW_MS)
    expired = _jws({**VALID, "exp": NOW_MS / 1000 - 1})
    challenge = failing.evaluate_response(_initial_response(expired))
    assert challenge == b'{"status":"invalid_token"}' and not failing.complete
    with pytest.raises(SaslAuthenticationError, match='^{"status":"invalid_token"}$'):
        failing.evaluate_response(b"\x01")


def test_oauthbearer_malformed_and_other_authzid() -> None:
    server = OAuthBearerServer(ValidatorOptions(), lambda: NOW_MS)
    with pytest.raises(SaslError, match="Invalid OAUTHBEARER client first message"):
        server.evaluate_response(b"n,,auth=Bearer x")
    with pytest.raises(SaslAuthenticationError, match=r"authorization id \(bob\) that is"):
        server.evaluate_response(_initial_response(_jws(VALID), authzid="bob"))


# -- keystores ----------------------------------------------------------------------------------


def _keystore_variants(pki: Pki, folder: Path) -> dict[str, dict[str, str]]:
    """The same key and chain as PEM file, inline PEM, encrypted PEM and PKCS12."""
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
        load_pem_private_key,
        pkcs12,
    )
    from cryptography.x509 import load_pem_x509_certificates

    pem = pki.keystore_file.read_bytes()
    key = load_pem_private_key(pem, None)
    chain = load_pem_x509_certificates(pem)
    chain_pem = b"".join(c.public_bytes(Encoding.PEM) for c in chain).decode()
    encrypted = folder / "encrypted.pem"
    encrypted.write_bytes(
        key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"kpw"))
        + chain_pem.encode()
    )
    store = folder / "broker.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker", key, chain[0], chain[1:], BestAvailableEncryption(b"spw")
        )
    )
    inline_key = key.private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"kpw")
    )
    return {
        "pem file": {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore_file)},
        "encrypted pem": {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(encrypted),
            "ssl.key.password": "kpw",
        },
        "inline pem": {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": inline_key.decode(),
            "ssl.keystore.certificate.chain": chain_pem,
            "ssl.key.password": "kpw",
        },
        "pkcs12": {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(store),
            "ssl.keystore.password": "spw",
        },
        "inline truststore": {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.keystore_file),
            "ssl.truststore.location": "",
            "ssl.truststore.certificates": pki.ca_file.read_text(),
        },
    }


@pytest.mark.parametrize(
    "variant", ["pem file", "encrypted pem", "inline pem", "pkcs12", "inline truststore"]
)
def test_keystore_forms(pki: Pki, tmp_path: Path, variant: str) -> None:
    overrides = {**secure_overrides(pki), **_keystore_variants(pki, tmp_path)[variant]}
    overrides = {k: v for k, v in overrides.items() if v != ""}
    config = build_config(overrides)
    context = server_ssl_context(config, "SSL", "required")

    async def handshake() -> Any:
        server_end, client_end = trio.testing.memory_stream_pair()
        server = trio.SSLStream(server_end, context, server_side=True)
        client = trio.SSLStream(client_end, _client_context(pki, True), server_hostname="127.0.0.1")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.do_handshake)
            await server.do_handshake()
        return server.getpeercert()

    assert str(ssl_principal(trio.run(handshake))).startswith("User:CN=client,")


def test_wrong_key_password_is_refused_at_startup(pki: Pki, tmp_path: Path) -> None:
    variant = {**_keystore_variants(pki, tmp_path)["encrypted pem"], "ssl.key.password": "no"}
    config = build_config({**secure_overrides(pki), **variant})
    with pytest.raises(ConfigError, match="listener SSL: cannot set up TLS"):
        server_ssl_context(config, "SSL", "none")


# -- ssl.principal.mapping.rules (Kafka's SslPrincipalMapperTest cases) --------------------------


def test_principal_mapping_rules() -> None:
    mapper = SslPrincipalMapper.from_rules(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )
    commas = SslPrincipalMapper.from_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert commas.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"
    assert SslPrincipalMapper.from_rules("RULE:^CN=(.*)$/$1$2/").name("CN=x") == "x$2"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper.from_rules("RULE:^CN=admin$/admin/").name("CN=eve")


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_principal_mapping_rules(rules: str) -> None:
    with pytest.raises(ValueError):
        SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize(
    ("text", "count"), [("", 0), (",   , , ,  ", 0), (",,RULE://,,,DEFAULT,,", 2), ("DEFAULT", 1)]
)
def test_principal_mapping_rules_splitting(text: str, count: int) -> None:
    assert len(parse_rules(text)) == count


def test_mapped_principal_from_a_client_certificate(pki: Pki) -> None:
    certificate = trio.run(_handshake, pki, "requested", True)
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U,DEFAULT")
    assert str(ssl_principal(certificate, mapper)) == "User:CLIENT@ENG"


# -- re-authentication (KIP-368) ----------------------------------------------------------------

ALICE = KafkaPrincipal("User", "alice")
REAUTH_SETTINGS = SaslSettings(
    ("PLAIN", "SCRAM-SHA-256"), {"alice": "pw", "admin": "pw"}, max_reauth_ms=5000
)


def _decoded(request: Any) -> DecodedRequest:
    decoded = decode_request(encode_request(request, 9), HANDLERS)
    assert isinstance(decoded, DecodedRequest)
    return decoded


def _answer(frame: bytes | None, api_key: int, version: int) -> Any:
    assert frame is not None
    return decode_response(frame[4:], response_cls(api_key, version))[1]


def _reauthentication(clock: list[int], expires: bool = True) -> Reauthentication:
    def new_authenticator(previous: Session | None) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(
            REAUTH_SETTINGS,
            HANDLERS,
            lambda version, error: api_versions_response(HANDLERS, version, error),
            lambda user, mechanism: None,
            lambda: clock[0],
            previous,
        )

    session = Session("PLAIN", ALICE, 5000, NOW_MS + 5000) if expires else Session("PLAIN", ALICE)
    return Reauthentication(session, new_authenticator, lambda: clock[0])


HANDSHAKE = build(17, 1, "SaslHandshakeRequest", mechanism="PLAIN")


def _plain_token(user: str) -> Any:
    return build(36, 2, "SaslAuthenticateRequest", auth_bytes=f"\0{user}\0pw".encode())


def test_session_lifetime_is_connections_max_reauth_ms() -> None:
    authenticator = SaslServerAuthenticator(
        REAUTH_SETTINGS,
        HANDLERS,
        lambda version, error: api_versions_response(HANDLERS, version, error),
        lambda user, mechanism: None,
        lambda: NOW_MS,
    )
    _exchange(authenticator, HANDSHAKE)
    response = _exchange(authenticator, _plain_token("alice"))
    assert response.session_lifetime == datetime.timedelta(milliseconds=5000)
    assert authenticator.session == Session("PLAIN", ALICE, 5000, NOW_MS + 5000)


def test_reauthentication_renews_the_session() -> None:
    clock = [NOW_MS + 4000]
    reauth = _reauthentication(clock)
    assert not reauth.takes(_decoded(metadata_request([])))
    assert reauth.takes(_decoded(HANDSHAKE))
    assert _answer(reauth.receive(_decoded(HANDSHAKE)), 17, 1).error_code == ErrorCode.none
    token = _decoded(_plain_token("alice"))
    assert reauth.takes(token)
    response = _answer(reauth.receive(token), 36, 2)
    assert (response.error_code, response.session_lifetime.total_seconds()) == (ErrorCode.none, 5)
    assert (reauth.session.expires_at_ms, reauth.renewals, reauth.failed) == (
        NOW_MS + 9000,
        1,
        None,
    )
    clock[0] += 999  # at most one re-authentication a second: this handshake goes to its handler
    assert not reauth.takes(_decoded(HANDSHAKE))
    clock[0] = NOW_MS + 9000
    assert reauth.expired


def test_reauthentication_keeps_the_principal() -> None:
    reauth = _reauthentication([NOW_MS])
    assert reauth.takes(_decoded(HANDSHAKE))
    reauth.receive(_decoded(HANDSHAKE))
    response = _answer(reauth.receive(_decoded(_plain_token("admin"))), 36, 2)
    assert (response.error_code, response.error_message) == (
        ErrorCode.sasl_authentication_failed,
        "Cannot change principals during re-authentication from User.alice: User.admin",
    )
    assert reauth.failed is not None and reauth.failed.delay_close


def test_reauthentication_keeps_the_mechanism() -> None:
    reauth = _reauthentication([NOW_MS])
    scram = _decoded(build(17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-256"))
    assert reauth.takes(scram)
    assert _answer(reauth.receive(scram), 17, 1).error_code == ErrorCode.none  # as Kafka
    assert reauth.receive(_decoded(_plain_token("alice"))) is None
    assert reauth.failed is not None
    assert reauth.failed.failure == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for"
        " re-authentication of mechanism 'PLAIN'"
    )


def test_a_session_without_end_is_not_reauthenticated() -> None:
    reauth = _reauthentication([NOW_MS], expires=False)
    assert not reauth.takes(_decoded(HANDSHAKE))  # its handler answers ILLEGAL_SASL_STATE
    assert not reauth.expired


def test_oauthbearer_session_ends_with_the_token() -> None:
    settings = SaslSettings(("OAUTHBEARER",), max_reauth_ms=600_000)
    authenticator = SaslServerAuthenticator(
        settings,
        HANDLERS,
        lambda version, error: api_versions_response(HANDLERS, version, error),
        lambda user, mechanism: None,
        lambda: NOW_MS,
    )
    _exchange(authenticator, build(17, 1, "SaslHandshakeRequest", mechanism="OAUTHBEARER"))
    token = _initial_response(_jws(VALID))  # exp: 60 s from now
    response = _exchange(authenticator, build(36, 2, "SaslAuthenticateRequest", auth_bytes=token))
    assert response.session_lifetime == datetime.timedelta(seconds=60)
