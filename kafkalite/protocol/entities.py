"""Building kio request and response entities: one construction for every version.

Importable by every layer: handlers build responses with it, and the broker builds the
requests it sends to other brokers (replica fetches, transaction markers, verification).
"""

from __future__ import annotations

import dataclasses
import datetime
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

NO_THROTTLE = datetime.timedelta(0)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    """kio's response module for an API and version (its classes build the response)."""
    return load_payload_module(api_key, version, EntityType.response)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def make(cls: type, **values: Any) -> Any:
    """Build a kio entity of any version from version-agnostic values.

    Values for fields this version lacks are dropped, so a handler writes one construction
    for every version it serves.
    """
    names = _field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)


def millis(duration: datetime.timedelta) -> int:
    """A kio timedelta field (timeouts, retention) as Kafka's integer milliseconds."""
    return duration // datetime.timedelta(milliseconds=1)
