"""A progress line on stderr (done, rate, ETA) shown only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_REDRAW_S = 0.2
_WIDTH = 24


class Progress:
    def __init__(self, unit: str, total: float | None = None, stream: TextIO | None = None) -> None:
        self.unit = unit
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.done = 0.0
        self.started = time.monotonic()
        self._drawn = 0.0

    def advance(self, amount: float = 1) -> None:
        self.done += amount
        if self.enabled and time.monotonic() - self._drawn >= _REDRAW_S:
            self._draw()

    def close(self) -> None:
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.done / elapsed
        text = f"{_amount(self.done, self.unit)} {_amount(rate, self.unit)}/s"
        if self.total:
            fraction = min(self.done / self.total, 1.0)
            filled = int(fraction * _WIDTH)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            bar = "#" * filled + "." * (_WIDTH - filled)
            text = f"[{bar}] {fraction:4.0%} {text} ETA {_duration(eta)}"
        return text

    def _draw(self) -> None:
        self._drawn = time.monotonic()
        self.stream.write("\r\x1b[K" + self.line())
        self.stream.flush()


def _amount(value: float, unit: str) -> str:
    if unit == "bytes":
        for name in ("B", "KiB", "MiB", "GiB"):
            if value < 1024 or name == "GiB":
                return f"{value:.0f} {name}" if name == "B" else f"{value:.1f} {name}"
            value /= 1024
    return f"{value:.0f} {unit}"


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "--:--"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return f"{minutes:02d}:{secs:02d}"
