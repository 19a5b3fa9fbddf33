"""`share.auto.offset.reset`: where a share-partition starts when it has no state (Kafka's
ShareGroupAutoOffsetResetStrategy): `latest` (the default), `earliest`, or
`by_duration:<ISO-8601 duration>` (the first record at most that old; the end of the log when
none is).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LATEST, EARLIEST, BY_DURATION = "latest", "earliest", "by_duration"
# java.time.Duration.parse's grammar: PnDTnHnMn.nS, each part optional, signs allowed.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


class InvalidStrategy(ValueError):
    """Not a strategy Kafka accepts (its message)."""


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    kind: str
    duration_ms: int = 0

    def __str__(self) -> str:
        return self.kind


def parse_duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as Java's Duration.parse reads it, in milliseconds (None: not
    one)."""
    match = _DURATION.fullmatch(text)
    if match is None or match.group(3) == "T" or not any(match.group(i) for i in (2, 4, 5, 6)):
        return None
    days, hours, minutes, seconds = (int(match.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = (match.group(7) or "").ljust(9, "0")
    nanos = int(fraction) * (-1 if match.group(6) and match.group(6).startswith("-") else 1)
    total_ns = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1_000_000_000 + nanos
    return (-total_ns if match.group(1) == "-" else total_ns) // 1_000_000


def parse(value: str, name: str = "share.auto.offset.reset") -> AutoOffsetReset:
    """Kafka's validator: case-insensitive earliest/latest, or by_duration with a duration
    that is not negative."""
    lowered = value.strip().lower()
    if lowered in (LATEST, EARLIEST):
        return AutoOffsetReset(lowered)
    kind, colon, duration = value.strip().partition(":")
    if kind.lower() == BY_DURATION and colon:
        millis = parse_duration_ms(duration.strip())
        if millis is not None and millis >= 0:
            return AutoOffsetReset(BY_DURATION, millis)
    raise InvalidStrategy(
        f"Invalid value `{value}` for configuration {name}. The value must be either "
        "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
    )
