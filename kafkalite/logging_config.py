"""The broker's logging from its properties, log4j-style:

    kafkalite.log.level=INFO                                   # every logger (root)
    kafkalite.log.levels=kafkalite.storage=DEBUG,kafkalite.coordinator=WARN
    kafkalite.log.format=text                                  # or json: one object per line

Levels are log4j's (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF) or Python's names.
`serve --log-level` wins over kafkalite.log.level.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TextIO

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}
FORMATS = ("text", "json")


def parse_level(text: str) -> int:
    level = LEVELS.get(text.strip().upper())
    if level is None:
        raise ValueError(f"expected one of {', '.join(LEVELS)}")
    return level


def parse_levels(text: str) -> dict[str, int]:
    """`logger=LEVEL,...` -> {logger: level}."""
    levels = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, level = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{item!r} is not logger=LEVEL")
        levels[name.strip()] = parse_level(level)
    return levels


def parse_format(text: str) -> str:
    if text.strip() not in FORMATS:
        raise ValueError(f"expected one of {', '.join(FORMATS)}")
    return text.strip()


class JsonFormatter(logging.Formatter):
    """One JSON object per record; a traceback stays inside its record, as `exception`."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(
    level: int = logging.INFO,
    levels: dict[str, int] | None = None,
    fmt: str = "text",
    stream: TextIO | None = None,
) -> None:
    """Replace the root handler: one line per record on `stream` (stdout)."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name, logger_level in (levels or {}).items():
        logging.getLogger(name).setLevel(logger_level)


def configure_from_properties(raw: Mapping[str, str], cli_level: str | None = None) -> None:
    """configure() from the kafkalite.log.* properties (already validated by build_config)."""
    configure(
        parse_level(cli_level or raw.get("kafkalite.log.level", "INFO")),
        parse_levels(raw.get("kafkalite.log.levels", "")),
        parse_format(raw.get("kafkalite.log.format", "text")),
    )
