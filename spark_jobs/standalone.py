"""A standalone Spark cluster on this machine, from pyspark's own distribution.

    python -m spark_jobs.standalone [--workers 2] [--cores 1] [--memory 512m] [--dir DIR]

starts a master and `--workers` workers (each offering `--cores` cores and `--memory` to
executors) on 127.0.0.1 and free ports, prints the master URL (`spark://127.0.0.1:PORT`, for
the jobs' `--master`) and its web UI, and runs until Ctrl-C or SIGTERM, which stop all of it
(the workers' executors too). The daemons' logs and the workers' work dirs (one directory per
application and executor, with its stdout/stderr) go under `--dir` (default: a new temporary
directory).

pyspark's pip package has `bin/spark-class` but not `sbin/start-master.sh`, so the daemons are
started as `spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`, each in a
process group of its own (the executors a worker launches join its group), and stopped by
group. `SPARK_DAEMON_MEMORY` (default here 256m) sizes the daemons' own JVMs.

An application's executors must fit a worker: `--conf spark.executor.memory=512m` (Spark's
default, 1g, is more than the default `--memory` here offers, and the application would wait
for resources forever), and `--conf spark.cores.max=N` to take N cores in all.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalite.testing import free_ports
from spark_jobs.jars import SetupError, check_java

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """pyspark's distribution (bin/, jars/), or $SPARK_HOME when set."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


@dataclass
class StandaloneCluster:
    work_dir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "512m"
    host: str = "127.0.0.1"
    daemon_memory: str = "256m"
    master_port: int = 0
    ui_port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _logs: list[Path] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.ui_port}"

    def worker_dir(self, index: int) -> Path:
        return self.work_dir / f"worker-{index}"

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        check_java()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        # The master cannot listen on port 0 and tell which port it got.
        self.master_port, self.ui_port = free_ports(2, self.host)
        try:
            self._spawn(
                "master",
                [MASTER_CLASS, "--host", self.host, "--port", str(self.master_port)]
                + ["--webui-port", str(self.ui_port)],
            )
            for index in range(1, self.workers + 1):
                self.worker_dir(index).mkdir(exist_ok=True)
                self._spawn(
                    f"worker-{index}",
                    [WORKER_CLASS, self.master_url, "--host", self.host, "--port", "0"]
                    + ["--webui-port", "0", "--cores", str(self.cores)]
                    + ["--memory", self.memory, "--work-dir", str(self.worker_dir(index))],
                )
            self._wait_until_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, arguments: list[str]) -> None:
        log = self.work_dir / f"{name}.log"
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": self.host,
            # The executors' scratch space (shuffle, fetched jars) with the rest, not in /tmp.
            "SPARK_LOCAL_DIRS": str(self.work_dir / "local"),
            "SPARK_DAEMON_MEMORY": os.environ.get("SPARK_DAEMON_MEMORY", self.daemon_memory),
        }
        with open(log, "wb") as output:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *arguments],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own group: the executors a worker starts too
            )
        self.processes.append(process)
        self._logs.append(log)

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, alive workers, cores, applications)."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=10) as response:
            state: dict[str, Any] = json.load(response)
            return state

    def _wait_until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for process, log in zip(self.processes, self._logs, strict=True):
                if process.poll() is not None:
                    raise SetupError(
                        f"{log.stem} exited with code {process.returncode} while starting "
                        f"(log: {log})"
                    )
            with contextlib.suppress(OSError, ValueError):
                state = self.state()
                if state.get("status") == "ALIVE" and state.get("aliveworkers") == self.workers:
                    return
            if time.monotonic() > deadline:
                raise SetupError(
                    f"the Spark master at {self.master_url} has not {self.workers} alive workers "
                    f"after {timeout:g}s (logs in {self.work_dir})"
                )
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """Workers first (with their executors), then the master: SIGTERM to each process
        group, SIGKILL to a group still there after `timeout`."""
        for process in reversed(self.processes):
            _stop_group(process, timeout)
        self.processes.clear()
        self._logs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_group(process: subprocess.Popen[bytes], timeout: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:  # executors may outlive the worker's JVM by a moment
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.standalone",
        description="A standalone Spark cluster (a master and workers) on 127.0.0.1.",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores each worker offers")
    parser.add_argument("--memory", default="512m", help="memory each worker offers")
    parser.add_argument("--dir", type=Path, help="logs and work dirs (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.cores < 1:
        parser.error("--workers and --cores must be at least 1")
    work_dir = args.dir or Path(tempfile.mkdtemp(prefix="spark-standalone-"))
    cluster = StandaloneCluster(work_dir, args.workers, args.cores, args.memory)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())
    try:
        cluster.start()
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        print(f"master: {cluster.master_url}  (web UI {cluster.ui_url}, logs in {work_dir})")
        print(f"{args.workers} workers, {args.cores} core(s) and {args.memory} each; Ctrl-C stops")
        sys.stdout.flush()
        while not stop.wait(1.0):
            if any(p.poll() is not None for p in cluster.processes):
                print("error: a Spark daemon exited; stopping", file=sys.stderr)
                return 1
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
