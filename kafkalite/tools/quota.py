"""`kafkalite quota list|set|remove`: client quotas (DescribeClientQuotas, AlterClientQuotas):
byte rates and controller mutation rates of users, client ids, both, and their defaults, as
`kafka-configs.sh --entity-type users|clients` manages them. Sent on kafkalite's own client:
PLAINTEXT listeners only."""

from __future__ import annotations

import argparse
from typing import Any

from kafkalite.tools.common import Connection, ToolError, UsageError, connection
from kafkalite.tools.output import emit

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
    "connection_creation_rate",
)
HEADERS = ["ENTITY", "QUOTA", "VALUE"]


def register(commands: Any, parents: dict, parser_class: type) -> None:
    both = [parents["connection"], parents["output"]]
    quota = commands.add_parser(
        "quota", help="client quotas of users and client ids: list, set, remove"
    )
    sub = quota.add_subparsers(dest="action", required=True, parser_class=parser_class)

    list_ = sub.add_parser("list", parents=both, help="quotas (all, or of the entity named)")
    _entity_options(list_)
    list_.add_argument(
        "--strict", action="store_true", help="only the entity named, not those containing it"
    )
    list_.set_defaults(run=list_quotas)

    set_ = sub.add_parser("set", parents=both, help="set quotas of a user, client id or both")
    _entity_options(set_)
    for key in KEYS[:2]:
        set_.add_argument(f"--{key.replace('_', '-')}", type=_rate, metavar="BYTES_PER_S")
    set_.add_argument(
        "--request-percentage",
        type=_positive_float,
        metavar="PERCENT",
        help="share of a request handler's time (100: one handler)",
    )
    set_.add_argument(
        "--connection-creation-rate",
        type=_rate,
        metavar="PER_S",
        help="connections an address may open a second (with --ip or --ip-default)",
    )
    set_.add_argument(
        "--controller-mutation-rate",
        type=_positive_float,
        metavar="PARTITIONS_PER_S",
        help="partitions created or deleted a second (KIP-599)",
    )
    set_.add_argument("--validate-only", action="store_true", help="check, change nothing")
    set_.set_defaults(run=set_quotas)

    remove = sub.add_parser("remove", parents=both, help="remove quotas of an entity")
    _entity_options(remove)
    remove.add_argument(
        "--quota",
        action="append",
        choices=KEYS,
        help="repeatable (default: every quota the entity has)",
    )
    remove.set_defaults(run=remove_quotas)


def _entity_options(parser: argparse.ArgumentParser) -> None:
    user = parser.add_mutually_exclusive_group()
    user.add_argument("--user", metavar="NAME", help="a user (principal name)")
    user.add_argument("--user-default", action="store_true", help="the default user")
    client = parser.add_mutually_exclusive_group()
    client.add_argument("--client-id", metavar="ID")
    client.add_argument("--client-id-default", action="store_true", help="the default client id")
    ip = parser.add_mutually_exclusive_group()
    ip.add_argument("--ip", metavar="ADDRESS", help="a client address (connection_creation_rate)")
    ip.add_argument("--ip-default", action="store_true", help="the default client address")


def _rate(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("a quota must be greater than 0")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("a quota must be greater than 0")
    return value


def entity(args: argparse.Namespace) -> tuple[tuple[str, str | None], ...]:
    """The entity the options name (None: a default), as Kafka orders its types."""
    pairs: list[tuple[str, str | None]] = []
    if args.user is not None or args.user_default:
        pairs.append(("user", _name(args.user, "user")))
    if args.client_id is not None or args.client_id_default:
        pairs.append(("client-id", _name(args.client_id, "client id")))
    if args.ip is not None or args.ip_default:
        pairs.append(("ip", _name(args.ip, "ip")))
    return tuple(pairs)


def _name(name: str | None, what: str) -> str | None:
    if name is not None and not name:
        raise UsageError(
            f"a {what} must not be empty (the default is --{what.replace(' ', '-')}-default)"
        )
    return name


def _required_entity(args: argparse.Namespace) -> tuple[tuple[str, str | None], ...]:
    named = entity(args)
    if not named:
        raise UsageError("name a --user, --client-id or both, or an --ip (or their --...-default)")
    return named


def entity_text(named: tuple[tuple[str, str | None], ...]) -> str:
    return " ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in named)


def _address(conn: Connection) -> str:
    from kafkalite.tools.raw_requests import require_plaintext

    require_plaintext(conn, "quota")
    return conn.bootstrap.split(",")[0].strip()


def describe(
    conn: Connection, named: tuple[tuple[str, str | None], ...], strict: bool
) -> list[tuple[Any, dict[str, float]]]:
    from kafkalite.tools.raw_requests import describe_client_quotas

    components = [
        (kind, MATCH_DEFAULT, None) if name is None else (kind, MATCH_EXACT, name)
        for kind, name in named
    ]
    return describe_client_quotas(conn, _address(conn), components, strict)


def _emit(args: argparse.Namespace, found: list[tuple[Any, dict[str, float]]]) -> None:
    data = [
        {"entity": dict(named), "quotas": {k: _number(v) for k, v in quotas.items()}}
        for named, quotas in found
    ]
    rows = [
        [entity_text(named), key, _number(value)]
        for named, quotas in found
        for key, value in sorted(quotas.items())
    ]
    emit(args.format, data, [(None, HEADERS, rows)])


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else value


def list_quotas(args: argparse.Namespace) -> int:
    conn = connection(args)
    _emit(args, describe(conn, entity(args), args.strict))
    return 0


def _alter(
    conn: Connection,
    named: tuple[tuple[str, str | None], ...],
    ops: dict[str, float | None],
    validate_only: bool = False,
) -> None:
    from kafkalite.tools.raw_requests import alter_client_quotas

    error, message = alter_client_quotas(conn, _address(conn), named, ops, validate_only)
    if error:  # (kio's ErrorCode.none is 0; kio is imported only when a request is sent)
        detail = f": {message}" if message else ""
        raise ToolError(
            f"cannot alter quotas of {entity_text(named)}: {error.name.upper()}{detail}"
        )


def set_quotas(args: argparse.Namespace) -> int:
    named = _required_entity(args)
    ops: dict[str, float | None] = {
        key: float(value) for key in KEYS if (value := getattr(args, key)) is not None
    }
    if not ops:
        raise UsageError(
            "give at least one of --producer-byte-rate, --consumer-byte-rate, "
            "--request-percentage, --controller-mutation-rate, --connection-creation-rate"
        )
    conn = connection(args)
    _alter(conn, named, ops, args.validate_only)
    found = [(named, {k: v for k, v in ops.items() if v is not None})]
    _emit(args, found)  # type: ignore[arg-type]
    return 0


def remove_quotas(args: argparse.Namespace) -> int:
    named = _required_entity(args)
    conn = connection(args)
    keys = args.quota
    if not keys:
        found = describe(conn, named, strict=True)
        keys = [key for each, quotas in found if dict(each) == dict(named) for key in quotas]
        if not keys:
            raise ToolError(f"{entity_text(named)} has no quotas")
    _alter(conn, named, dict.fromkeys(keys))
    data = {"entity": dict(named), "removed": list(dict.fromkeys(keys))}
    rows = [[entity_text(named), key] for key in data["removed"]]
    emit(args.format, data, [(None, ["ENTITY", "REMOVED-QUOTA"], rows)])
    return 0
