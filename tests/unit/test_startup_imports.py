"""A command imports only what it runs (issue 21): no test tools at run time, no broker for
the admin tools or `--help`. Each case is a fresh interpreter; the import times themselves are
figures of bench/startup.py, not asserted here."""

from __future__ import annotations

import subprocess
import sys

import pytest

_LOADED = """
import sys
{code}
print()
print(" ".join(sorted(m for m in {modules!r} if m in sys.modules)))
"""


def loaded(code: str, *modules: str) -> list[str]:
    """Which of `modules` a fresh interpreter has imported after running `code`."""
    script = _LOADED.format(code=code, modules=modules)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[-1].split()  # the last line (after any --help text)


def test_the_broker_imports_no_test_tools() -> None:
    code = "import kafkalite.serve_command, kafkalite.cli, kafkalite.tools, kafkalite.testing"
    assert loaded(code, "hypothesis", "pytest", "_pytest") == []


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["topic", "list", "--help"], ["serve", "--help"], ["cluster", "--help"]],
)
def test_help_imports_neither_broker_nor_protocol(argv: list[str]) -> None:
    code = f"from kafkalite.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    assert loaded(code, "kafkalite.broker", "kafkalite.server", "trio", "kio.schema") == []


def test_serve_refuses_a_bad_config_before_importing_the_broker() -> None:
    code = (
        "from kafkalite.cli import main\n"
        "assert main(['serve', '--override', 'num.partitions=zero']) == 2"
    )
    assert loaded(code, "kafkalite.broker", "kafkalite.server", "trio", "kio.schema") == []
