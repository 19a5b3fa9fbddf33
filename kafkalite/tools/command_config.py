"""A Kafka client properties file, as the Kafka tools' `--command-config` reads it, turned into
librdkafka properties for the `kafkalite` commands and the console.

Names librdkafka shares with the Java client pass through (security.protocol, sasl.mechanism,
client.id...). The Java-only ones are translated:
* sasl.jaas.config with PlainLoginModule or ScramLoginModule -> sasl.username, sasl.password;
* ssl.truststore.location (ssl.truststore.type=PEM) -> ssl.ca.location, and
  ssl.truststore.certificates -> ssl.ca.pem;
* ssl.keystore.location: PKCS12 -> librdkafka's ssl.keystore.location and .password; PEM (key
  and certificate chain in one file) -> ssl.certificate.location and ssl.key.location;
* ssl.endpoint.identification.algorithm "" (Java's "off") -> none.
A JKS store cannot be read by librdkafka: that, a login module other than PLAIN or SCRAM, and an
unreadable or malformed file are CommandConfigError (the commands: one line, exit 2).
Settings that only tune the JVM's TLS (ssl.protocol, ssl.enabled.protocols, the key and
trust manager algorithms) are dropped: librdkafka chooses those itself.
"""

from __future__ import annotations

import re
from pathlib import Path


class CommandConfigError(ValueError):
    """A file librdkafka cannot be given (the commands answer it as a usage error)."""


_JVM_ONLY = {
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.password",  # a PEM truststore has none
}
_LOGIN_MODULES = ("PlainLoginModule", "ScramLoginModule")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def read_command_config(path: Path) -> dict[str, str]:
    """librdkafka properties from the Java client properties file at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandConfigError(f"cannot read command config {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CommandConfigError(f"command config {path} is not UTF-8 text") from None
    return translate(parse_properties(text), str(path))


def parse_properties(text: str) -> dict[str, str]:
    """Java properties: `key=value` or `key: value` lines, `#`/`!` comments, a trailing
    backslash continuing a line."""
    properties: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if match is None:
            properties[line] = ""
            continue
        key, value = match.groups()
        properties[key] = value
    return properties


def translate(java: dict[str, str], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in java.items():
        if key in _JVM_ONLY or key.startswith(("ssl.truststore.", "ssl.keystore.")):
            continue
        if key == "sasl.jaas.config":
            out.update(_jaas(value, where))
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value or "none"
        else:
            out[key] = value
    out.update(_truststore(java, where))
    out.update(_keystore(java, where))
    return out


def _jaas(value: str, where: str) -> dict[str, str]:
    if not any(module in value for module in _LOGIN_MODULES):
        raise CommandConfigError(
            f"{where}: sasl.jaas.config: only PlainLoginModule and ScramLoginModule can be"
            " translated for librdkafka"
        )
    options = {name: text.replace('\\"', '"') for name, text in _JAAS_OPTION.findall(value)}
    if "username" not in options or "password" not in options:
        raise CommandConfigError(
            f'{where}: sasl.jaas.config needs username="..." and password="..."'
        )
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _truststore(java: dict[str, str], where: str) -> dict[str, str]:
    if "ssl.truststore.certificates" in java:
        return {"ssl.ca.pem": java["ssl.truststore.certificates"]}
    location = java.get("ssl.truststore.location")
    if location is None:
        return {}
    kind = java.get("ssl.truststore.type", "JKS").upper()
    if kind != "PEM":
        raise CommandConfigError(
            f"{where}: ssl.truststore.type {kind}: librdkafka reads PEM trust stores only"
            " (set ssl.truststore.type=PEM with a PEM file)"
        )
    return {"ssl.ca.location": location}


def _keystore(java: dict[str, str], where: str) -> dict[str, str]:
    location = java.get("ssl.keystore.location")
    if location is None:
        return {}
    kind = java.get("ssl.keystore.type", "JKS").upper()
    if kind == "PKCS12":
        out = {"ssl.keystore.location": location}
        if "ssl.keystore.password" in java:
            out["ssl.keystore.password"] = java["ssl.keystore.password"]
        return out
    if kind == "PEM":
        out = {"ssl.certificate.location": location, "ssl.key.location": location}
        if "ssl.key.password" in java:
            out["ssl.key.password"] = java["ssl.key.password"]
        return out
    raise CommandConfigError(
        f"{where}: ssl.keystore.type {kind}: librdkafka reads PKCS12 or PEM key stores only"
    )
