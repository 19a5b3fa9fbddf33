"""The series a Grafana dashboard queries: metric names and the labels its queries need.

A small PromQL reader, enough for dashboards: it removes what is not a metric name (strings,
Grafana `$variables`, range and offset durations, `by`/`without` groupings, keywords,
numbers) and keeps the identifiers not followed by `(` (those are functions). Label names
come from the `{...}` matchers and the `by (...)` groupings. Grafana's template functions
are handled as Grafana reads them: `query_result(expr)` is an expression, the second
argument of `label_values(metric, label)` a label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*(.*?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$")
_VARIABLE = re.compile(r"\$\{?\w+\}?")
_DURATION = re.compile(r"\[[^\]]*\]|\boffset\s+\S+")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "by", "without", "on", "ignoring", "group_left"}
    | {"group_right", "offset", "inf", "nan"}
)


@dataclass
class Queried:
    """One metric a dashboard queries and the labels its queries select or group it by."""

    name: str
    labels: set[str] = field(default_factory=set)


def expressions(dashboard: Any) -> Iterator[str]:
    """Every PromQL expression of a dashboard: panel targets and templating queries."""
    if isinstance(dashboard, dict):
        for key, value in dashboard.items():
            if key == "expr" and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, str) and "(" in value:
                yield value  # a templating query (a bare "prometheus" is a data source type)
            elif key == "query" and isinstance(value, dict) and "query" in value:
                yield value["query"]
            else:
                yield from expressions(value)
    elif isinstance(dashboard, list):
        for item in dashboard:
            yield from expressions(item)


def _metric_names(expr: str) -> Iterator[str]:
    """The metric identifiers of an expression whose strings and groupings are gone."""
    for match in _IDENTIFIER.finditer(expr):
        name = match.group(0)
        following = expr[match.end() :].lstrip()
        if following.startswith("(") or name.lower() in _KEYWORDS:
            continue  # a function call (sum, rate, query_result...) or an operator
        yield name


def queried(expr: str) -> dict[str, Queried]:
    """Metric name -> what the expression needs of it."""
    expr = _STRING.sub('""', _VARIABLE.sub("", expr.strip()))  # a "{" in a regex is gone
    extra_label = None
    label_values = _LABEL_VALUES.match(expr)
    if label_values:  # Grafana: the label's values among the metric's series
        expr, extra_label = label_values.group(1), label_values.group(2)
    grouped = {label.strip() for group in _GROUPING.findall(expr) for label in group.split(",")}
    found: dict[str, Queried] = {}
    # Each selector: a metric name, then its matchers (a name never stands inside {}).
    for part in re.split(r"(?<=\})", expr):
        matchers = " ".join(_MATCHERS.findall(part))
        labels = set(_MATCHER_LABEL.findall(matchers))
        bare = _MATCHERS.sub(" ", part)
        bare = _NUMBER.sub(" ", _DURATION.sub(" ", _GROUPING.sub(" ", bare)))
        names = list(_metric_names(bare))
        for name in names:
            entry = found.setdefault(name, Queried(name))
            if name == names[-1]:  # the matchers follow the last name before them
                entry.labels |= labels
    for entry in found.values():
        entry.labels |= grouped - {""}
        if extra_label:
            entry.labels.add(extra_label)
    return found


def dashboard_series(path: Path) -> dict[str, Queried]:
    """Every metric a dashboard file queries, with the labels any of its queries need."""
    merged: dict[str, Queried] = {}
    for expr in expressions(json.loads(path.read_text())):
        for name, entry in queried(expr).items():
            merged.setdefault(name, Queried(name)).labels |= entry.labels
    return merged
