"""`kafkalite serve [--config server.properties] [--override key=value]...`
(and `kafkalite cluster --brokers N`: kafkalite/cluster/launcher.py), and the admin
tools (`kafkalite topic|group|produce|consume|cluster info|config ...`, kafkalite/tools/).

A bad argument, property or value, or an unusable port or directory: one line on stderr and
exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from kafkalite.completion import add_completion_command, bash_script
from kafkalite.config import ConfigError, build_config, parse_override, read_properties
from kafkalite.console.command import add_console_command, run_console

# Every command imports only what it runs (the broker for `serve`, the launcher for `cluster`,
# the Kafka client for the tools, the web stack for `console`), so a command starts quickly.
EXIT_USAGE = 2
MAX_BROKERS = 32  # of `kafkalite cluster` (ports, ids and ZooKeeper's load stay small)
DEFAULT_CLUSTER_DIR = "data/cluster"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"kafkalite: {message}\n")
        sys.exit(EXIT_USAGE)


class _VersionAction(argparse.Action):
    """`--version`: the installed distribution's version (read only when asked for)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("kafkalite")
        except PackageNotFoundError:  # run from a source tree that is not installed
            text = "unknown (not installed)"
        sys.stdout.write(f"kafkalite {text}\n")
        parser.exit()


def _parser(with_tools: bool = True) -> argparse.ArgumentParser:
    parser = _Parser(prog="kafkalite", description="A Kafka-compatible broker.")
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    serve_cmd = commands.add_parser("serve", help="run the broker")
    serve_cmd.add_argument("--config", type=Path, help="server.properties file")
    serve_cmd.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a property (repeatable), like kafka-server-start.sh --override",
    )
    serve_cmd.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="level of every logger (default: kafkalite.log.level, INFO)",
    )
    _add_cluster_command(commands)
    if with_tools:
        from kafkalite import tools  # confluent-kafka: `serve` does not pay for importing it

        tools.register(commands, _Parser)
    add_console_command(commands)
    add_completion_command(commands)
    return parser


def _add_cluster_command(commands: argparse._SubParsersAction) -> None:
    cluster = commands.add_parser(
        "cluster", help="run a local cluster: a real ZooKeeper and N replicating brokers"
    )
    cluster.add_argument(
        "--brokers", type=_broker_count, default=3, help=f"how many (1-{MAX_BROKERS})"
    )
    cluster.add_argument("--data-dir", type=Path, default=Path(DEFAULT_CLUSTER_DIR))
    cluster.add_argument("--port", type=int, default=0, help="first broker's port (default: free)")
    cluster.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    cluster.add_argument(
        "--tiered",
        action="store_true",
        help="also start a local S3 server (gofakes3) and tier to it",
    )
    cluster.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL with generated certificates, ACLs and an admin user (settings printed)",
    )


def _broker_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_BROKERS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_BROKERS}, got {text!r}")
    return int(text)


def _run_cluster(args: argparse.Namespace) -> int:
    from kafkalite.cluster import launcher

    overrides = dict(map(parse_override, args.override))
    build_config({}, overrides.items())  # a bad property fails here, before anything starts
    taken = sorted(set(overrides) & launcher.LAUNCHER_PROPERTIES)
    if taken:
        return _fail(f"the cluster launcher sets {', '.join(taken)} itself")
    return launcher.run(args.brokers, args.data_dir, overrides, args.port, args.tiered, args.secure)


def _fail(message: str) -> int:
    sys.stderr.write(f"kafkalite: {message}\n")
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser(with_tools=argv[:1] != ["serve"])
    args = parser.parse_args(argv)
    if args.command == "completion":
        sys.stdout.write(bash_script(parser))
        return 0
    if hasattr(args, "run"):  # an admin command (kafkalite/tools/)
        from kafkalite import tools

        return tools.run(args)
    if args.command == "cluster":
        try:
            return _run_cluster(args)
        except ConfigError as exc:
            return _fail(str(exc))
    if args.command == "console":
        return run_console(args)
    logging.basicConfig(
        level=args.log_level or "INFO",
        stream=sys.stdout,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:  # a bad config fails before the broker's imports
        file_props = read_properties(args.config) if args.config else {}
        config = build_config(file_props, map(parse_override, args.override))
        from kafkalite.serve_command import run_broker

        return run_broker(config, args.log_level)
    except ConfigError as exc:
        return _fail(str(exc))


if __name__ == "__main__":
    sys.exit(main())
