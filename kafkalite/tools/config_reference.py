"""The configuration reference (docs/configuration.md), generated from the property tables
themselves so that it cannot drift: `make docs` runs
`python -m kafkalite.tools.config_reference > docs/configuration.md`, and
tests/unit/test_config_reference.py fails when the file is stale.

Valid values are read from each validator's own bounds (the `low`/`high`/`choices` its factory
closed over, or its docstring), not restated by hand.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from kafkalite.broker.dynamic_config import DYNAMIC
from kafkalite.broker.topic_config import TOPIC_CONFIGS
from kafkalite.config import (
    I32_MAX,
    LONG_MAX,
    PROPERTIES,
    TYPE_BOOLEAN,
    TYPE_DOUBLE,
    TYPE_INT,
    TYPE_LIST,
    TYPE_LONG,
    TYPE_PASSWORD,
    TYPE_SHORT,
    TYPE_STRING,
)

TYPE_NAMES = {
    TYPE_BOOLEAN: "boolean",
    TYPE_STRING: "string",
    TYPE_INT: "int",
    TYPE_SHORT: "short",
    TYPE_LONG: "long",
    TYPE_DOUBLE: "double",
    TYPE_LIST: "list",
    TYPE_PASSWORD: "password",
}
_BOUND_NAMES = {LONG_MAX: "2^63-1", I32_MAX: "2^31-1", -(2**31): "-2^31", -(2**63): "-2^63"}

HEADER = """# Configuration reference

Generated from the code by `make docs` (`python -m kafkalite.tools.config_reference`); a test
fails when this page and the code disagree. Names, types and defaults are Apache Kafka's
wherever Kafka has the property; `kafkalite.*` properties are kafkalite's own.

Broker properties come from `server.properties` (`kafkalite serve -c FILE`) and
`--override key=value`; the dynamic ones can also be changed at run time with
`kafka-configs.sh --alter --entity-type brokers` or `kafkalite config set broker ...`.
Topic configs are set at creation or with `kafka-configs.sh --entity-type topics` /
`kafkalite config set topic ...`; a topic config unset falls back to its broker synonym.
"""


def _bound(number: int) -> str:
    return _BOUND_NAMES.get(number, str(number))


def valid_values(parse: Callable[[str], object]) -> str:
    """What the validator accepts, from the bounds or choices it closed over, else its
    docstring's first line, else nothing said."""
    try:
        closed = inspect.getclosurevars(parse).nonlocals
    except TypeError:  # a builtin or a class
        closed = {}
    if "choices" in closed:
        return ", ".join(closed["choices"])
    low, high = closed.get("low"), closed.get("high")
    if isinstance(low, int) or isinstance(high, int):
        low_text = "" if low is None else _bound(low)
        high_text = "" if high is None else _bound(high)
        return f"[{low_text}, {high_text}]" if low_text or high_text else ""
    if parse.__name__ == "_bool":
        return "true, false"
    doc = inspect.getdoc(parse)
    return doc.splitlines()[0] if doc else ""


def _cell(text: str | None) -> str:
    if text is None:
        return "(none)"
    if text == "":
        return '""'
    return "`" + text.replace("|", "\\|") + "`"


def broker_table() -> list[str]:
    lines = [
        "## Broker properties",
        "",
        "| property | type | default | valid values | dynamic | description |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(PROPERTIES):
        prop = PROPERTIES[name]
        dynamic = "yes" if name in DYNAMIC else "no"
        lines.append(
            f"| `{name}` | {TYPE_NAMES.get(prop.config_type, 'string')} | {_cell(prop.default)}"
            f" | {valid_values(prop.parse).replace('|', '/')} | {dynamic}"
            f" | {prop.doc.replace('|', '/')} |"
        )
    return lines


def topic_table() -> list[str]:
    lines = [
        "## Topic configs",
        "",
        "| config | type | default | valid values | broker synonym |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(TOPIC_CONFIGS):
        definition = TOPIC_CONFIGS[name]
        synonym = f"`{definition.broker_synonym}`" if definition.broker_synonym else ""
        lines.append(
            f"| `{name}` | {TYPE_NAMES.get(definition.config_type, 'string')}"
            f" | {_cell(definition.default)} | {valid_values(definition.parse).replace('|', '/')}"
            f" | {synonym} |"
        )
    return lines


def render() -> str:
    return "\n".join([HEADER, *broker_table(), "", *topic_table(), ""])


def main() -> None:
    print(render(), end="")


if __name__ == "__main__":
    main()
