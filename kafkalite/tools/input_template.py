"""`kafkalite produce -f TEMPLATE`: one input line read as rpk's produce format does.

Tokens: %k key, %v value (%s too, as kcat's output), %p partition, %h headers
(`name=value` pairs separated by commas), %% a percent sign; \\t and \\\\ escapes. Anything
else is literal text the line must contain, e.g. `-f '%k %v'` or `-f '%p|%k|%h|%v'`. Each
line is one message; the last token takes the rest of the line, the others stop at the first
occurrence of the literal that follows them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"%[kvsph%]|\\[t\\n]")
_FIELDS = {"%k": "key", "%v": "value", "%s": "value", "%p": "partition", "%h": "headers"}
_ESCAPES = {"%%": "%", "\\t": "\t", "\\\\": "\\", "\\n": ""}  # \n ends every line anyway


class TemplateError(ValueError):
    """A template that cannot be read, or a line that does not fit it."""


@dataclass
class Message:
    value: bytes
    key: bytes | None = None
    partition: int | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class InputTemplate:
    text: str
    pattern: re.Pattern[bytes]

    def parse(self, line: bytes) -> Message:
        found = self.pattern.fullmatch(line)
        if found is None:
            raise TemplateError(f"line does not match -f {self.text!r}: {line[:80]!r}")
        parts = found.groupdict()
        message = Message(value=parts.get("value") or b"", key=parts.get("key"))
        if parts.get("partition") is not None:
            message.partition = _partition(parts["partition"])
        if parts.get("headers"):
            message.headers = _headers(parts["headers"])
        return message


def compile_template(text: str) -> InputTemplate:
    pieces: list[str] = []
    seen: set[str] = set()
    position = 0
    after_field = False  # no literal text yet since the last field
    for token in _TOKEN.finditer(text):
        literal = text[position : token.start()]
        pieces.append(re.escape(literal))
        after_field = after_field and not literal
        position = token.end()
        name = _FIELDS.get(token.group())
        if name is None:
            pieces.append(re.escape(_ESCAPES[token.group()]))
            after_field = after_field and not _ESCAPES[token.group()]
            continue
        if name in seen:
            raise TemplateError(f"-f {text!r} names {token.group()} twice")
        if after_field:
            raise TemplateError(f"-f {text!r}: two fields need text between them")
        seen.add(name)
        after_field = True
        pieces.append(f"(?P<{name}>.*?)")
    pieces.append(re.escape(text[position:]))
    if "value" not in seen:
        raise TemplateError(f"-f {text!r} has no %v for the value")
    return InputTemplate(text, re.compile("".join(pieces).encode(), re.DOTALL))


def _partition(text: bytes) -> int:
    if not text.isdigit():
        raise TemplateError(f"partition {text[:20]!r} is not a number")
    return int(text)


def _headers(text: bytes) -> list[tuple[str, bytes]]:
    headers = []
    for pair in text.split(b","):
        name, equals, value = pair.partition(b"=")
        if not equals or not name:
            raise TemplateError(f"header {pair[:40]!r} is not name=value")
        headers.append((name.decode("utf-8", "replace"), value))
    return headers
