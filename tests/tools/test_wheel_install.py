"""The wheel holds the whole product (issue 21, point 1): every file of the kafkalite package
(the console's page and script, the ZooKeeper pom), and an install of it, not this source tree,
starts a broker and runs a CLI command. The dependencies come from this virtualenv: a fresh
venv with the runtime dependencies from PyPI is what `make serve` makes (README)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import kafkalite
from compat.cli_runner import kafkalite as run_kafkalite
from compat.cli_runner import ok
from kafkalite.testing import BrokerProcess

SOURCE = Path(kafkalite.__file__).resolve().parent.parent


def _tracked_package_files() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", "kafkalite"], cwd=SOURCE, capture_output=True, text=True, check=True
    )
    return set(listed.stdout.split())


def test_the_wheel_installs_a_working_broker_and_cli(tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "source"  # a copy: building writes build/ and *.egg-info
    files = _tracked_package_files() | {"pyproject.toml", "README.md", "LICENSE"}
    for name in files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes((SOURCE / name).read_bytes())
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path), "."],
        cwd=source,
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("kafkalite-*.whl")
    assert set(zipfile.ZipFile(wheel).namelist()) >= _tracked_package_files()

    target = tmp_path / "installed"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    # The broker process and the CLI import the installed copy (`-m` puts the working
    # directory first on the path: not this source tree).
    monkeypatch.setenv("PYTHONPATH", str(target))
    monkeypatch.chdir(tmp_path)
    where = subprocess.run(
        [sys.executable, "-c", "import kafkalite; print(kafkalite.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip() == str(target / "kafkalite" / "__init__.py")
    with BrokerProcess(tmp_path / "data") as broker:
        ok(run_kafkalite("topic", "create", "w", "-b", broker.bootstrap))
        assert "w" in ok(run_kafkalite("topic", "list", "-b", broker.bootstrap)).split()
