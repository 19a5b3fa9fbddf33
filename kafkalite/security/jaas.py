"""Kafka's inline JAAS configuration (`sasl.jaas.config`), as its JaasConfig parses it:

org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret" user_alice="alice-secret";
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FLAGS = ("required", "requisite", "sufficient", "optional")
_MODULE = re.compile(r"\s*([A-Za-z_$][\w$.]*)\s+(\w+)")
_OPTION = re.compile(r'\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')
_END = re.compile(r"\s*;")


class JaasConfigError(ValueError):
    """Not a JAAS configuration Kafka would accept."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _unquote(value: str) -> str:
    if value.startswith('"'):
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def parse_jaas_config(text: str) -> list[LoginModule]:
    modules = []
    position = 0
    while text[position:].strip():
        match = _MODULE.match(text, position)
        if match is None or match.group(2).lower() not in _FLAGS:
            raise JaasConfigError(f"expected 'LoginModule flag' at {text[position:]!r:.40}")
        name, flag, position = match.group(1), match.group(2).lower(), match.end()
        options: dict[str, str] = {}
        while (end := _END.match(text, position)) is None:
            option = _OPTION.match(text, position)
            if option is None:
                raise JaasConfigError(f"expected key=value or ';' at {text[position:]!r:.40}")
            options[option.group(1)] = _unquote(option.group(2))
            position = option.end()
        position = end.end()
        modules.append(LoginModule(name, flag, options))
    if not modules:
        raise JaasConfigError("no login module")
    return modules
