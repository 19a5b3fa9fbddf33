"""Each API module opens with the versions it serves; that header must match its registry
entry (the table ApiVersions advertises)."""

from __future__ import annotations

import re
import sys

import pytest

from kafkalite.apis import registry

HEADER = re.compile(
    r"(?P<name>\w+) \(key (?P<key>\d+)\), versions? (?P<low>\d+)(?:-(?P<high>\d+))?"
)
ENTRIES = [(sys.modules[api.handle.__module__], api) for api in registry.HANDLERS.values()]


@pytest.mark.parametrize(
    ("module", "api"), ENTRIES, ids=[m.__name__.rsplit(".", 1)[1] for m, _ in ENTRIES]
)
def test_header_names_the_registered_versions(module, api) -> None:
    match = HEADER.match(module.__doc__ or "")
    assert match, f"{module.__name__} does not open with 'Name (key N), versions A-B'"
    served_from = max(api.min_version, api.legacy_below)
    low, high = int(match["low"]), int(match["high"] or match["low"])
    assert (int(match["key"]), low, high) == (api.api_key, served_from, api.max_version)
    if api.legacy_below > api.min_version:  # advertised below what kio can decode
        advertised = f"{api.min_version}-{api.legacy_below - 1} advertised"
        assert advertised in " ".join(module.__doc__.split())
