"""What every API module shares: the request context, the handler record and `make`.

Each API module opens with the versions it serves and exposes `API`, an `ApiHandler`.
Handlers are plain functions of (context, request) returning the response (or None when
no response is due, as for acks=0 produce); long-polling handlers are coroutines.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

if TYPE_CHECKING:
    from kafkalite.broker.broker import Broker

NO_THROTTLE = datetime.timedelta(0)


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str = ""  # the peer's address, as Kafka reports it ("/127.0.0.1")

    @property
    def schema(self) -> ModuleType:
        """kio's response module for this API and version (its classes build the response)."""
        return response_module(self.api_key, self.api_version)


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    min_version: int  # advertised in ApiVersions
    max_version: int
    handle: Callable[[RequestContext, Any], Any]
    is_async: bool = False
    # Answers versions below `legacy_below` that kio has no schema for:
    # (version, correlation_id, frame) -> size-prefixed response frame.
    legacy: Callable[[int, int, bytes], bytes] | None = None
    legacy_below: int = 0

    def accepts(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


@cache
def response_module(api_key: int, version: int) -> ModuleType:
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
