"""`kafkalite consume -f`: kcat's template tokens, and rpk's %v for the value."""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.tools.consume import render


@dataclass
class FakeMessage:  # the parts of confluent_kafka.Message that render reads
    _key: bytes | None = b"k1"
    _value: bytes | None = b"hello"

    def topic(self) -> str:
        return "orders"

    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return 7

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, 1700000000000)

    def headers(self) -> list[tuple[str, bytes]]:
        return [("tag", b"red")]


def test_kcat_tokens() -> None:
    line = render("%t/%p@%o %k=%s (%K/%S) %T %h%%\\n", FakeMessage())
    assert line == "orders/2@7 k1=hello (2/5) 1700000000000 tag=red%\n"


def test_rpk_value_token_is_the_value() -> None:
    assert render("%k %v\\n", FakeMessage()) == "k1 hello\n"


def test_a_null_value_renders_empty_with_size_minus_one() -> None:
    assert render("[%s] %S", FakeMessage(_value=None)) == "[] -1"
