"""Reading a broker's Prometheus endpoint (kafkalite.metrics.port=0) in tests."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

from kafkalite.testing import BrokerProcess

_METRICS_LINE = re.compile(r"metrics on (http://\S+)/metrics")
_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$")


def base_url(broker: BrokerProcess) -> str:
    match = _METRICS_LINE.search(broker.output())
    assert match, broker.output()
    return match.group(1)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(broker: BrokerProcess) -> dict[str, float]:
    """`name{labels}` -> value, labels as the exposition prints them (sorted by name)."""
    status, text = get(base_url(broker) + "/metrics")
    assert status == 200
    samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and not line.startswith("#"):
            samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples
