"""The web console for browser tests: its process and a headless Debian Chromium.

`kafkalite console --port 0` prints the URL it serves; a reader thread waits for that line
(no polling of the port). Chromium and chromedriver are Debian's packages, installed by
scripts/install_chromium.sh (the Makefile's test targets run it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

_SERVING = re.compile(r"kafkalite console on (http://\S+?)/? for ")
INSTALL_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_chromium.sh"


class ConsoleProcess:
    def __init__(self, bootstrap: str, *extra: str) -> None:
        self.command = [
            sys.executable,
            "-m",
            "kafkalite",
            "console",
            "--bootstrap",
            bootstrap,
            "--port",
            "0",
            *extra,
        ]
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.url = ""
        self._serving = threading.Event()

    def start(self, timeout: float = 60.0) -> ConsoleProcess:
        self.process = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, args=(self.process,), daemon=True)
        self._reader.start()
        if not self._serving.wait(timeout) or not self.url:
            self.stop()
            raise RuntimeError("console did not start:\n" + "".join(self.lines))
        return self

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)
            match = _SERVING.search(line)
            if match:
                self.url = match.group(1)
                self._serving.set()
        self._serving.set()

    def exit_code(self, timeout: float = 30.0) -> int:
        """Wait for the process to end (and its output to be read): its exit code."""
        assert self.process is not None
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> ConsoleProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def chromium_paths() -> tuple[str, str]:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver:
        raise RuntimeError(f"chromium/chromedriver missing: run {INSTALL_SCRIPT} (make test does)")
    return browser, driver


def chromium(width: int = 1400, height: int = 900) -> WebDriver:
    """Headless Debian Chromium driven by its own chromedriver (Selenium downloads nothing)."""
    os.environ.setdefault("SE_OFFLINE", "true")
    browser, driver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(driver), options=options)


def wait_for(driver: WebDriver, condition, timeout: float = 30.0, message: str = ""):  # noqa: ANN001, ANN201
    """Poll `condition` until true. An element the page re-rendered between finding it and
    reading it (StaleElementReference: a CI run under load) is looked up again next poll."""
    ignored = (NoSuchElementException, StaleElementReferenceException)
    wait = WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=ignored)
    return wait.until(condition, message)
