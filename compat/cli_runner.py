"""Run `kafkalite <tool command>`: its exit code, stdout and stderr.

`kafkalite()` runs it as a user does, in a subprocess; `kafkalite_here()` calls the same
`main()` in this process (no interpreter start and imports per command: the suites run
dozens of commands).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CLI_TIMEOUT = 120.0


def kafkalite(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KAFKALITE_")}
    environ["HOME"] = environ.get("HOME", "/nonexistent")
    return subprocess.run(
        [sys.executable, "-m", "kafkalite", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        env={**environ, **(env or {})},
        cwd=cwd,
    )


def kafkalite_here(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    from kafkalite.cli import main

    out, err = io.StringIO(), io.StringIO()
    stdin_stream = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    saved_stdin = sys.stdin
    sys.stdin = stdin_stream
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's usage errors
                code = int(exc.code or 0)
    finally:
        sys.stdin = saved_stdin
    return subprocess.CompletedProcess(["kafkalite", *args], code, out.getvalue(), err.getvalue())


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """stdout of a command that must have succeeded silently on stderr."""
    assert result.returncode == 0, (result.args, result.returncode, result.stderr)
    assert result.stderr == "", result.stderr
    return result.stdout


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(result))


def one_line_error(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The single stderr line of a command that failed with `code`, nothing on stdout."""
    assert result.returncode == code, (result.args, result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {result.stderr!r}"
    assert lines[0].startswith("kafkalite: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "Traceback" not in result.stderr
    return lines[0]
