"""The package as a user installs it (issue 21, point 1): `python -m build` makes an sdist and
a wheel (built from that sdist) holding every file of the kafkalite package, and a fresh
virtualenv with `pip install <wheel>` (its runtime dependencies from PyPI, nothing else) runs
the broker, the CLI, the console and the pytest plugin's registration, without pyspark,
selenium or test tools."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

import kafkalite
from kafkalite.process import free_ports

SOURCE = Path(kafkalite.__file__).resolve().parent.parent
TEST_ONLY = ("pyspark", "selenium", "pytest", "hypothesis", "matplotlib", "ruff", "mypy")


def _tracked_package_files() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", "kafkalite"], cwd=SOURCE, capture_output=True, text=True, check=True
    )
    return set(listed.stdout.split())


def _run(*argv: str | Path, timeout: float = 120) -> str:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) of a copy of the tracked sources (building writes build/, egg-info)."""
    tmp = tmp_path_factory.mktemp("build")
    source = tmp / "source"
    for name in _tracked_package_files() | {"pyproject.toml", "README.md", "LICENSE"}:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes((SOURCE / name).read_bytes())
    _run(sys.executable, "-m", "build", "--outdir", tmp / "dist", source, timeout=300)
    (sdist,) = (tmp / "dist").glob("kafkalite-*.tar.gz")
    (wheel,) = (tmp / "dist").glob("kafkalite-*.whl")
    return sdist, wheel


def test_the_sdist_and_the_wheel_hold_the_whole_package(built: tuple[Path, Path]) -> None:
    sdist, wheel = built
    assert set(zipfile.ZipFile(wheel).namelist()) >= _tracked_package_files()
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert names >= _tracked_package_files() | {"pyproject.toml", "README.md"}


def test_a_fresh_venv_with_the_wheel_serves_and_administers(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "pip", "install", "--quiet", built[1], timeout=600)
    installed = _run(venv / "bin" / "pip", "list", "--format", "freeze").lower()
    assert [name for name in TEST_ONLY if f"\n{name}==" in f"\n{installed}"] == []
    kafkalite_bin = venv / "bin" / "kafkalite"
    assert _run(kafkalite_bin, "--version").strip() == f"kafkalite {version('kafkalite')}"
    assert "usage: kafkalite console" in _run(kafkalite_bin, "console", "--help")
    plugin = "from importlib.metadata import entry_points as e; print(e(group='pytest11'))"
    assert "kafkalite.pytest_plugin" in _run(venv / "bin" / "python", "-c", plugin)

    (port,) = free_ports(1)
    bootstrap = f"127.0.0.1:{port}"
    broker = subprocess.Popen(
        [kafkalite_bin, "serve", "--override", f"listeners=PLAINTEXT://{bootstrap}"]
        + ["--override", f"log.dirs={tmp_path / 'data'}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,  # not this source tree: the installed copy is imported
    )
    try:
        # The CLI waits up to --timeout for the broker to answer: no polling needed.
        _run(kafkalite_bin, "topic", "create", "w", "-b", bootstrap, "--timeout", "60")
        assert "w" in _run(kafkalite_bin, "topic", "list", "-b", bootstrap).split()
    finally:
        broker.terminate()
        _, errors = broker.communicate(timeout=60)
    assert broker.returncode == 0, errors[-2000:]
