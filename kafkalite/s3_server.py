"""A real S3-compatible server for tiered storage: gofakes3, built from the Go module proxy.

    python -m kafkalite.s3_server [--port 9000] [--dir DIR] [--bucket kafkalite-tiered]

`ensure_gofakes3()` runs, once, `go install github.com/johannesboyne/gofakes3/cmd/gofakes3@<v>`
with everything Go writes under `.cache/go/` (module and build caches) and the binary in
`.cache/gofakes3/<version>/` (a lock keeps concurrent first uses to one build; about 25 s
cold). `S3Server` starts it on a free port with its filesystem backend in a directory,
creating the bucket, and stops it (also when the caller fails). The tests' fixture and the
README's set-up use it; nothing in the broker depends on it (any S3 endpoint will do).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kafkalite.maven_dist import ProvisionError
from kafkalite.process import free_ports

MODULE = "github.com/johannesboyne/gofakes3"
VERSION = "v1.2.0"
CACHE = Path(__file__).resolve().parent.parent / ".cache"
GO_DIR = CACHE / "go"
BUILD_TIMEOUT_S = 900
START_TIMEOUT_S = 30
DEFAULT_BUCKET = "kafkalite-tiered"


def cache_root() -> Path:
    return Path(os.environ.get("KAFKALITE_GOFAKES3_CACHE") or CACHE / "gofakes3")


def go_env() -> dict[str, str]:
    """Go's caches and config under .cache/go (as compat/franz_go does), never $HOME."""
    env = dict(os.environ)
    env.update(
        GOPATH=str(GO_DIR / "path"),
        GOMODCACHE=str(GO_DIR / "mod"),
        GOCACHE=str(GO_DIR / "build"),
        XDG_CONFIG_HOME=str(GO_DIR / "config"),
        GOFLAGS="-modcacherw",
        GOTOOLCHAIN="local",
    )
    return env


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def ensure_gofakes3(version: str = VERSION) -> Path:
    """The gofakes3 binary, built on first use; raises ProvisionError with one line."""
    bin_dir = cache_root() / version
    binary = bin_dir / "gofakes3"
    if binary.is_file():
        return binary
    go = shutil.which("go")
    if go is None:
        raise ProvisionError("the S3 test server (gofakes3) is built with Go: no `go` on PATH")
    with _locked(cache_root() / ".lock"):
        if binary.is_file():
            return binary
        partial = bin_dir.with_name(f"{version}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        print(f"kafkalite: building gofakes3 {version} (once)", file=sys.stderr)
        try:
            subprocess.run(
                [go, "install", f"{MODULE}/cmd/gofakes3@{version}"],
                env={**go_env(), "GOBIN": str(partial)},
                check=True,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
            )
        except subprocess.CalledProcessError as exc:
            tail = " ".join(exc.stderr.strip().splitlines()[-3:])
            raise ProvisionError(f"go install gofakes3 failed: {tail}") from None
        except subprocess.TimeoutExpired:
            raise ProvisionError(f"go install gofakes3 took over {BUILD_TIMEOUT_S} s") from None
        shutil.rmtree(bin_dir, ignore_errors=True)
        partial.rename(bin_dir)
    return binary


class S3Server:
    """gofakes3 on 127.0.0.1:<port>, its buckets in `data_dir` (a temp dir by default).

    `stop()` and `start()` again keep the data (a store that goes away and comes back)."""

    def __init__(
        self, data_dir: Path | None = None, port: int = 0, bucket: str = DEFAULT_BUCKET
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kafkalite-s3-"))
        self.port = port or free_ports(1)[0]
        self.bucket = bucket
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def broker_properties(self, task_interval_ms: int = 200) -> dict[str, str]:
        """The broker settings that tier to this server."""
        return {
            "remote.log.storage.system.enable": "true",
            "remote.log.manager.task.interval.ms": str(task_interval_ms),
            "rsm.config.storage.s3.endpoint.url": self.endpoint_url,
            "rsm.config.storage.s3.bucket.name": self.bucket,
            "rsm.config.storage.s3.region": "us-east-1",
            "rsm.config.storage.s3.path.style.access.enabled": "true",
            "rsm.config.storage.aws.access.key.id": "kafkalite",
            "rsm.config.storage.aws.secret.access.key": "kafkalite-secret",
        }

    def start(self) -> S3Server:
        binary = ensure_gofakes3()
        self.process = subprocess.Popen(
            [
                str(binary),
                "-host",
                f"127.0.0.1:{self.port}",
                "-backend",
                "fs",
                "-fs.path",
                str(self.data_dir),
                "-fs.create",
                "-initialbucket",
                self.bucket,
                "-quiet",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._listening():
            if self.process.poll() is not None:
                err = (
                    self.process.stderr.read().decode(errors="replace")
                    if self.process.stderr
                    else ""
                )
                raise ProvisionError(
                    f"gofakes3 exited with {self.process.returncode}: {err[-300:]}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise ProvisionError(
                    f"gofakes3 did not listen on {self.port} in {START_TIMEOUT_S} s"
                )
            time.sleep(0.05)
        return self

    def _listening(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
            return True
        return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()

    def kill(self) -> None:
        """SIGKILL (a crashed store: what it was writing is left torn); `start()` again
        serves the same data on the same port."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        if process is not None and process.stderr is not None:
            process.stderr.close()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafkalite.s3_server", description="a local S3 server (gofakes3)"
    )
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--dir", type=Path, help="where the buckets are kept (default: a temp dir)")
    parser.add_argument("--bucket", default=DEFAULT_BUCKET)
    args = parser.parse_args(argv)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    server = S3Server(args.dir, args.port, args.bucket)
    try:
        server.start()
    except ProvisionError as exc:
        print(f"kafkalite: {exc}", file=sys.stderr)
        return 1
    print(f"S3 server on {server.endpoint_url}, bucket {server.bucket}, data in {server.data_dir}")
    for name, value in server.broker_properties().items():
        print(f"{name}={value}")
    signal.signal(signal.SIGTERM, _exit)  # the server is stopped with this process
    try:
        assert server.process is not None
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
