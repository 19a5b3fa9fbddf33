"""`kafkalite console [--bootstrap HOST:PORT,...] [--host 127.0.0.1] [--port 8080]`.

Bad arguments or a port that cannot be bound: one line and exit code 2. A cluster that does
not answer within --timeout: one line naming the address and exit code 1.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys

from kafkalite.tools.common import add_client_settings

EXIT_USAGE, EXIT_UNREACHABLE = 2, 1
DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "KAFKALITE_BOOTSTRAP"
_ADDRESS = re.compile(r"(\[[^\]]+\]|[^\s:,\[\]]+):(\d{1,5})")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range 0-65535")
    return port


def _bootstrap(text: str) -> str:
    addresses = [part.strip() for part in text.split(",")]
    for address in addresses:
        match = _ADDRESS.fullmatch(address)
        if not match or not 0 < int(match.group(2)) <= 65535:
            raise argparse.ArgumentTypeError(f"bootstrap address {address!r} is not host:port")
    return ",".join(addresses)


def _metrics_url(text: str) -> str:
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", text):
        raise argparse.ArgumentTypeError(f"metrics URL {text!r} is not http(s)://host:port/path")
    return text


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise argparse.ArgumentTypeError(f"timeout must be a positive number, got {text!r}")
    return value


def add_console_command(commands: argparse._SubParsersAction) -> None:
    console = commands.add_parser("console", help="run the web console for a Kafka cluster")
    console.add_argument(
        "-b",  # as every other command
        "--bootstrap",
        type=_bootstrap,
        default=None,
        help=f"cluster to talk to (default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})",
    )
    console.add_argument("--host", default="127.0.0.1", help="address to serve on")
    console.add_argument("--port", type=_port, default=8080, help="port to serve on (0: any)")
    console.add_argument("--timeout", type=_positive, default=10.0, help="cluster timeout (s)")
    console.add_argument(
        "--metrics",
        type=_metrics_url,
        action="append",
        default=[],
        metavar="URL",
        help="a broker's Prometheus /metrics URL, for partition sizes (repeatable)",
    )
    add_client_settings(console)


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"kafkalite: {message}\n")
    return code


def run_console(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C; Ctrl-C ends quietly with exit code 0, as the broker does."""
    try:
        return _serve(args)
    except KeyboardInterrupt:  # Ctrl-C: uvicorn stops gracefully, then re-raises SIGINT
        return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from kafkalite.console.app import build_app
    from kafkalite.console.cluster import Cluster, ClusterError
    from kafkalite.tools.command_config import CommandConfigError, read_command_config

    bootstrap = args.bootstrap
    if bootstrap is None:
        try:
            bootstrap = _bootstrap(os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP)
        except argparse.ArgumentTypeError as exc:
            return _fail(f"{BOOTSTRAP_ENV}: {exc}", EXIT_USAGE)
    try:
        sock = socket.create_server((args.host, args.port))
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", 2)
    client: dict[str, str] = {}
    if args.command_config is not None:
        try:
            client.update(read_command_config(args.command_config))
        except CommandConfigError as exc:
            return _fail(str(exc), EXIT_USAGE)
    client.update(dict(args.client_properties))
    cluster = Cluster(bootstrap, timeout=args.timeout, metrics_urls=args.metrics, client=client)
    try:
        cluster.metadata()
    except ClusterError:
        sock.close()
        return _fail(
            f"no Kafka broker answered at {bootstrap} within {args.timeout:g}s", EXIT_UNREACHABLE
        )
    host, port = sock.getsockname()[:2]
    print(f"kafkalite console on http://{host}:{port}/ for {bootstrap}", flush=True)
    config = uvicorn.Config(build_app(cluster), log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
