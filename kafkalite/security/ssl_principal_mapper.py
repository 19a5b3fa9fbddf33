"""`ssl.principal.mapping.rules`, as Kafka's SslPrincipalMapper: the client certificate's
distinguished name (RFC 2253) becomes the principal's name by the first rule that matches.

    RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT

`RULE:pattern/replacement/[LU]`: a pattern matching the whole name, a Java-style replacement
(`$1` back references, `\\` escapes), optionally lower- or upper-cased; `DEFAULT` is the name
as it is. No matching rule: the connection is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No rule maps this distinguished name."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None = None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), name)
        return (
            result.lower() if self.case == "L" else result.upper() if self.case == "U" else result
        )


def _java_replacement(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's Matcher replacement: `$n` is group n (extended digit by digit while a group of
    that number exists), `\\x` is x; a reference past the last group is literal text."""
    parts: list[str | int] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            parts.append(replacement[i + 1])
            i += 2
        elif char == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            number, i = int(replacement[i + 1]), i + 2
            if number > groups:  # Kafka escapes such references: they stay literal
                parts.append(f"${number}")
                continue
            while i < len(replacement) and replacement[i].isdigit():
                longer = number * 10 + int(replacement[i])
                if longer > groups:
                    break
                number, i = longer, i + 1
            parts.append(number)
        else:
            parts.append(char)
            i += 1
    return lambda match: "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Raises ValueError for a rule Kafka refuses."""
    rules = []
    for found in _SPLITTER.finditer(text.strip()):
        rule = found.group(1)
        parsed = _PARSER.match(rule)
        if parsed is None or parsed.end() != len(rule):
            raise ValueError(f"Invalid rule: {rule}")
        if parsed.group(1) is not None:
            rules.append(Rule())
        elif parsed.group(2) is not None:
            rules.append(Rule(re.compile(parsed.group(2)), parsed.group(4), parsed.group(6)))
        elif parsed.group(7):
            raise ValueError(f"Invalid rule: {rule}")
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class SslPrincipalMapper:
    rules: tuple[Rule, ...] = (Rule(),)

    @classmethod
    def from_rules(cls, text: str) -> SslPrincipalMapper:
        return cls(parse_rules(text))

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"No rules apply to {distinguished_name}")
