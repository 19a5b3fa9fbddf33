"""`kafkalite serve`: one broker process, from its configuration to a clean shutdown.

Imported only by that command (kafkalite/cli.py): it loads the whole broker.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import trio

from kafkalite.broker.broker import Broker, local_broker_info
from kafkalite.config import BrokerConfig
from kafkalite.logging_config import configure_from_properties
from kafkalite.metrics.http import open_metrics_listeners
from kafkalite.security.inter_broker import inter_broker_security
from kafkalite.server import bound_config, open_listeners, serve
from kafkalite.storage.dir_lock import LogDirInUse, lock_log_dir, unlock_log_dir
from kafkalite.storage.file_cache import raise_open_file_limit
from kafkalite.storage.remote.s3_storage import RemoteStorageError

log = logging.getLogger("kafkalite")
EXIT_USAGE = 2


def run_broker(config: BrokerConfig, log_level: str | None) -> int:
    """Run until SIGINT/SIGTERM; a ConfigError propagates (the caller prints it)."""
    return trio.run(_run, config, log_level)


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


async def _run(config: BrokerConfig, log_level: str | None) -> int:
    configure_from_properties(config.raw, log_level)
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
    inter_broker_security(config)  # ConfigError (one line, exit 2): brokers could not log in
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
            broker = Broker.open(
                config,
                metadata=metadata,
                controller=controller,
                authorizer=member.authorizer if member else None,
                scram_store=member.scram_store if member else None,
                quota_store=member.quota_store if member else None,
                group_config_store=member.group_config_store if member else None,
            )
        except (OSError, ValueError) as exc:
            return _fail(f"cannot use log dir {config.log_dir}: {exc}")
        except RemoteStorageError as exc:  # e.g. boto3 not installed
            return _fail(f"tiered storage: {exc}")
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
