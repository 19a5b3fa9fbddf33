"""`kafkalite serve [--config server.properties] [--override key=value]...`
(and `kafkalite cluster --brokers N`: kafkalite/cluster/launcher.py), and the admin
tools (`kafkalite topic|group|produce|consume|cluster info|config ...`, kafkalite/tools/).

A bad argument, property or value, or an unusable port or directory: one line on stderr and
exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import trio

from kafkalite.broker.broker import Broker, local_broker_info
from kafkalite.cluster import launcher
from kafkalite.config import (
    BrokerConfig,
    ConfigError,
    build_config,
    parse_override,
    read_properties,
)
from kafkalite.console.command import add_console_command, run_console
from kafkalite.logging_config import configure_from_properties
from kafkalite.metrics.http import open_metrics_listeners
from kafkalite.server import bound_config, open_listeners, serve
from kafkalite.storage.dir_lock import LogDirInUse, lock_log_dir, unlock_log_dir
from kafkalite.storage.file_cache import raise_open_file_limit

log = logging.getLogger("kafkalite")
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"kafkalite: {message}\n")
        sys.exit(EXIT_USAGE)


def _parser(with_tools: bool = True) -> argparse.ArgumentParser:
    parser = _Parser(prog="kafkalite", description="A Kafka-compatible broker.")
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
    return parser


def _add_cluster_command(commands: argparse._SubParsersAction) -> None:
    cluster = commands.add_parser(
        "cluster", help="run a local cluster: a real ZooKeeper and N replicating brokers"
    )
    cluster.add_argument("--brokers", type=_broker_count, default=3, help="how many (1-32)")
    cluster.add_argument("--data-dir", type=Path, default=launcher.DEFAULT_DATA_DIR)
    cluster.add_argument("--port", type=int, default=0, help="first broker's port (default: free)")
    cluster.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")


def _broker_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= launcher.MAX_BROKERS:
        raise argparse.ArgumentTypeError(f"expected 1 to {launcher.MAX_BROKERS}, got {text!r}")
    return int(text)


def _run_cluster(args: argparse.Namespace) -> int:
    overrides = dict(map(parse_override, args.override))
    build_config({}, overrides.items())  # a bad property fails here, before anything starts
    taken = sorted(set(overrides) & launcher.LAUNCHER_PROPERTIES)
    if taken:
        return _fail(f"the cluster launcher sets {', '.join(taken)} itself")
    return launcher.run(args.brokers, args.data_dir, overrides, args.port)


def _fail(message: str) -> int:
    sys.stderr.write(f"kafkalite: {message}\n")
    return EXIT_USAGE


def _lock_log_dirs(dirs: Sequence[Path]) -> list[int]:
    """Lock every log dir before anything reads or writes one; raises LogDirInUse/OSError."""
    locks: list[int] = []
    try:
        for log_dir in dirs:
            locks.append(lock_log_dir(log_dir))
    except BaseException:
        for fd in locks:
            unlock_log_dir(fd)
        raise
    return locks


async def _run(config_args: argparse.Namespace) -> int:
    file_props = read_properties(config_args.config) if config_args.config else {}
    config = build_config(file_props, map(parse_override, config_args.override))
    configure_from_properties(config.raw, config_args.log_level)
    try:
        locks = _lock_log_dirs(config.log_dirs)
    except LogDirInUse as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot use log dir: {exc.strerror or exc}: {exc.filename}")
    try:
        return await _run_locked(config)
    finally:
        for fd in locks:
            unlock_log_dir(fd)


async def _run_locked(config: BrokerConfig) -> int:
    started = time.monotonic()
    raise_open_file_limit()
    try:
        listeners = await open_listeners(config)
    except OSError as exc:
        where = ", ".join(f"{lst.host}:{lst.port}" for lst in config.listeners)
        return _fail(f"cannot listen on {where}: {exc.strerror or exc}")
    config = bound_config(config, listeners)
    metrics_listeners = await open_metrics_listeners(config)  # ConfigError: one line, exit 2
    async with contextlib.AsyncExitStack() as stack:
        metadata, controller, tasks, member = None, None, [], None
        if config.cluster_mode:
            from kafkalite.cluster.member import join_cluster  # imports kazoo
            from kafkalite.cluster.zk_client import ZkError

            try:
                member = await stack.enter_async_context(
                    join_cluster(config, local_broker_info(config))
                )
            except ZkError as exc:
                return _fail(f"cannot join the cluster at {config.str('zookeeper.connect')}: {exc}")
            metadata, controller, tasks = member.metadata, member.controller_api, member.tasks
        try:
            broker = Broker.open(config, metadata=metadata, controller=controller)
        except (OSError, ValueError) as exc:
            return _fail(f"cannot use log dir {config.log_dir}: {exc}")
        try:
            await trio.lowlevel.checkpoint()
            before_shutdown = None
            if member is not None:  # Kafka's controlled shutdown, on SIGTERM
                before_shutdown = functools.partial(
                    member.controlled_shutdown, broker.replica_manager
                )
            async with trio.open_nursery() as nursery:
                await nursery.start(
                    functools.partial(serve, tasks=tasks, before_shutdown=before_shutdown),
                    broker,
                    listeners,
                    metrics_listeners,
                )
                advertised = config.advertised_listeners[0]
                log.info(
                    "kafkalite started: node %d, cluster %s, listening on %s:%d, data in %s"
                    " (%.0f ms)",
                    broker.node_id,
                    broker.cluster_id,
                    advertised.host,
                    advertised.port,
                    config.log_dir,
                    (time.monotonic() - started) * 1000,
                )
        finally:
            broker.shutdown()
            log.info("kafkalite stopped cleanly")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser(with_tools=argv[:1] != ["serve"]).parse_args(argv)
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
    try:
        return trio.run(_run, args)
    except ConfigError as exc:
        return _fail(str(exc))


if __name__ == "__main__":
    sys.exit(main())
