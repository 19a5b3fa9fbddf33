"""What every tool command shares: where the cluster is, the clients, errors and exit codes.

The bootstrap address comes from `--bootstrap`, else `$KAFKALITE_BOOTSTRAP`, else the profile
file, else localhost:9092. The profile is TOML, at `--profile`, `$KAFKALITE_PROFILE` or
`~/.config/kafkalite/profile.toml` (`$XDG_CONFIG_HOME` honoured):

    bootstrap = "broker1:9092,broker2:9092"
    timeout = 10                      # seconds
    [client]                          # librdkafka properties for every client
    "security.protocol" = "SASL_SSL"
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import tomllib
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

EXIT_FAILURE = 1
EXIT_USAGE = 2
DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_TIMEOUT_S = 10.0
BOOTSTRAP_ENV = "KAFKALITE_BOOTSTRAP"
PROFILE_ENV = "KAFKALITE_PROFILE"
# librdkafka's own codes for "no broker answered" (as opposed to a broker's refusal).
_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
}


class ToolError(Exception):
    """Ends the command with one line on stderr and `exit_code`."""

    exit_code = EXIT_FAILURE


class UsageError(ToolError):
    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Connection:
    bootstrap: str
    timeout: float
    client: Mapping[str, str] = field(default_factory=dict)
    # What librdkafka reported of a failed login or TLS handshake (the reason a cluster
    # that does not answer gives no answer).
    login_errors: list[str] = field(default_factory=list, compare=False)

    def conf(self, **extra: Any) -> dict[str, Any]:
        """librdkafka configuration: quiet (errors become exceptions, never log lines)."""
        return {
            "bootstrap.servers": self.bootstrap,
            "logger": _SILENT,
            "error_cb": self._on_error,
            "socket.connection.setup.timeout.ms": max(1000, int(self.timeout * 1000)),
            **self.client,
            **extra,
        }

    def _on_error(self, error: KafkaError) -> None:
        if error.code() in _LOGIN_FAILURES:
            self.login_errors.append(error.str())


LOGIN_CHECK_S = 0.5
_LOGIN_FAILURES = (
    KafkaError._AUTHENTICATION,
    KafkaError._SSL,
    KafkaError.SASL_AUTHENTICATION_FAILED,
)


def _silent_logger() -> logging.Logger:
    logger = logging.getLogger("kafkalite.tools.librdkafka")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


_SILENT = _silent_logger()


def connection_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument(
        "-b",
        "--bootstrap",
        help=f"host:port[,...] (default: ${BOOTSTRAP_ENV}, the profile, {DEFAULT_BOOTSTRAP})",
    )
    group.add_argument("--profile", type=Path, help=f"profile TOML file (default: ${PROFILE_ENV})")
    group.add_argument("--timeout", type=positive_float, help="seconds to wait for the cluster")
    add_client_settings(group)
    return parent


def add_client_settings(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--command-config FILE and -X KEY=VALUE: the client's TLS and SASL settings."""
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="a Kafka client properties file, as the Kafka tools' (SASL and TLS settings)",
    )
    parser.add_argument(
        "-X",
        dest="client_properties",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="a librdkafka client property (repeatable), e.g. security.protocol=SSL",
    )


def output_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--format", choices=["table", "json"], default="table", help="table (people) or json"
    )
    return parent


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key, value


def profile_path(args: argparse.Namespace) -> Path | None:
    if args.profile is not None:
        return args.profile
    if os.environ.get(PROFILE_ENV):
        return Path(os.environ[PROFILE_ENV])
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    default = config_home / "kafkalite" / "profile.toml"
    return default if default.is_file() else None


def read_profile(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        with path.open("rb") as file:
            profile = tomllib.load(file)
    except OSError as exc:
        raise UsageError(f"cannot read profile {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"profile {path} is not valid TOML: {exc}") from None
    unknown = set(profile) - {"bootstrap", "timeout", "client"}
    if unknown:
        raise UsageError(f"profile {path}: unknown key(s) {', '.join(sorted(unknown))}")
    return profile


def connection(args: argparse.Namespace) -> Connection:
    profile = read_profile(profile_path(args))
    bootstrap = (
        args.bootstrap
        or os.environ.get(BOOTSTRAP_ENV)
        or profile.get("bootstrap")
        or DEFAULT_BOOTSTRAP
    )
    timeout = args.timeout or float(profile.get("timeout", DEFAULT_TIMEOUT_S))
    client = {str(k): str(v) for k, v in dict(profile.get("client", {})).items()}
    if getattr(args, "command_config", None) is not None:
        from kafkalite.tools.command_config import CommandConfigError, read_command_config

        try:
            client.update(read_command_config(args.command_config))
        except CommandConfigError as exc:
            raise UsageError(str(exc)) from None
    client.update(dict(args.client_properties))
    return Connection(str(bootstrap), timeout, client)


def admin_client(conn: Connection) -> AdminClient:
    """An AdminClient whose cluster answered a metadata request within the timeout."""
    client = new_client(AdminClient, conn.conf())
    check_reachable(client, conn)
    return client


def new_client(factory: Callable[[dict[str, Any]], Any], conf: dict[str, Any]) -> Any:
    """A librdkafka client; a property it refuses (`-X`, the profile) is a usage error."""
    try:
        return factory(conf)
    except (KafkaException, ValueError, TypeError) as exc:
        raise UsageError(f"bad client configuration: {error_text(exc)}") from None


def group_type(listed_type: Any) -> str:
    """librdkafka's ConsumerGroupType as Kafka's ListGroups names it (classic, consumer)."""
    return str(getattr(listed_type, "name", "UNKNOWN")).lower()


def check_reachable(client: Any, conn: Connection) -> Any:
    """The cluster metadata, or ToolError naming the address when no broker answers."""
    deadline = time.monotonic() + conn.timeout
    while True:  # in short steps: a refused login ends the wait at once
        try:
            return client.list_topics(timeout=min(LOGIN_CHECK_S, conn.timeout))
        except KafkaException as exc:
            client.poll(0)  # serves the error callbacks: a refused login says why
            if conn.login_errors or time.monotonic() >= deadline:
                raise unreachable(conn, exc) from None


def unreachable(conn: Connection, exc: KafkaException) -> ToolError:
    if conn.login_errors:  # it answered, and refused the login or the handshake
        return ToolError(f"{conn.bootstrap}: {conn.login_errors[-1]}")
    return ToolError(
        f"no answer from {conn.bootstrap} within {conn.timeout:g}s ({error_text(exc)})"
    )


def error_text(exc: BaseException) -> str:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return error.str() or error.name()
    return str(exc)


def is_unreachable(exc: BaseException) -> bool:
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() in _UNREACHABLE


def wait(future: Future, conn: Connection, what: str) -> Any:
    """A future's result; a broker's refusal or no answer becomes one line (exit 1)."""
    try:
        return future.result(timeout=conn.timeout + 5)
    except TimeoutError:
        raise ToolError(
            f"{what}: no answer from {conn.bootstrap} within {conn.timeout:g}s"
        ) from None
    except KafkaException as exc:
        if is_unreachable(exc):
            raise unreachable(conn, exc) from None
        raise ToolError(f"{what}: {error_text(exc)}") from None


def _label(key: Any) -> str:
    if isinstance(key, ConfigResource):
        return str(key.name)
    if isinstance(key, TopicPartition):
        return f"{key.topic}[{key.partition}]"
    return str(key)


def wait_all(futures: Mapping[Any, Future], conn: Connection, what: str) -> dict[Any, Any]:
    """Every future's result; all failures are reported together in one line."""
    results, failures = {}, []
    for key, future in futures.items():
        try:
            results[key] = wait(future, conn, f"{what} {_label(key)}")
        except ToolError as exc:
            failures.append(str(exc))
    if failures:
        raise ToolError("; ".join(failures))
    return results


def wait_named(future: Future, conn: Connection, what: str) -> Any:
    """As `wait`, the refusal naming Kafka's error code (scripts match on RESOURCE_NOT_FOUND)."""
    try:
        return future.result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if is_unreachable(exc) or not isinstance(error, KafkaError):
            return wait(future, conn, what)
        raise ToolError(f"{what}: {error.name()} ({error.str()})") from None
    except TimeoutError:
        return wait(future, conn, what)


def wait_each(futures: Mapping[Any, Future], conn: Connection, what: str) -> list[Any]:
    """Every future's result; the distinct refusals together in one line (exit 1)."""
    results, failures = [], []
    for future in futures.values():
        try:
            results.append(wait_named(future, conn, what))
        except ToolError as exc:
            failures.append(str(exc))
    if failures:
        raise ToolError("; ".join(dict.fromkeys(failures)))
    return results


def timestamp_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 date-time (local time unless it names a zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither epoch milliseconds nor an ISO-8601 date-time"
        ) from None


def topic_metadata(client: Any, conn: Connection, name: str) -> Any:
    """A topic's metadata, or None. From an all-topics request: asking for the topic by name
    would create it on a broker with auto.create.topics.enable."""
    try:
        topic = client.list_topics(timeout=conn.timeout).topics.get(name)
    except KafkaException as exc:
        raise unreachable(conn, exc) from None
    return None if topic is None or topic.error is not None else topic
