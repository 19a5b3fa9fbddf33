"""docs/configuration.md is the generator's output for the code as it is (make docs)."""

from __future__ import annotations

from pathlib import Path

from kafkalite.config import PROPERTIES
from kafkalite.tools.config_reference import render, valid_values

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_reference_page_is_up_to_date() -> None:
    assert REFERENCE.read_text() == render(), "docs/configuration.md is stale: run `make docs`"


def test_every_property_has_a_row() -> None:
    text = REFERENCE.read_text()
    assert all(f"| `{name}` |" in text for name in PROPERTIES)


def test_valid_values_come_from_the_validators_bounds() -> None:
    assert valid_values(PROPERTIES["broker.id"].parse) == "[0, 2^31-1]"
    assert valid_values(PROPERTIES["auto.create.topics.enable"].parse) == "true, false"
