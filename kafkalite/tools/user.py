"""`kafkalite user list|set-password|delete`: SCRAM credentials (DescribeUserScramCredentials,
AlterUserScramCredentials), as `kafka-configs.sh --entity-type users` manages them. The client
salts and hashes the password; the broker never sees it."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kafkalite.tools.common import (
    UsageError,
    admin_client,
    connection,
    positive_int,
    wait_each,
    wait_named,
)
from kafkalite.tools.output import emit

MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
DEFAULT_ITERATIONS = 4096


def register(commands: Any, parents: dict, parser_class: type) -> None:
    both = [parents["connection"], parents["output"]]
    user = commands.add_parser("user", help="SCRAM users: list, set passwords, delete")
    sub = user.add_subparsers(dest="action", required=True, parser_class=parser_class)

    list_ = sub.add_parser("list", parents=both, help="users and their SCRAM mechanisms")
    list_.add_argument("users", nargs="*", metavar="USER", help="only these users")
    list_.set_defaults(run=list_users)

    set_ = sub.add_parser("set-password", parents=both, help="create a user or change a password")
    set_.add_argument("user", metavar="USER")
    set_.add_argument("--mechanism", choices=sorted(MECHANISMS), default="SCRAM-SHA-256")
    set_.add_argument(
        "--iterations",
        type=positive_int,
        default=DEFAULT_ITERATIONS,
        help=f"(default: {DEFAULT_ITERATIONS}; Kafka accepts 4096 to 16384)",
    )
    set_.add_argument(
        "--password", help="(default: read from stdin; asked for, not echoed, on a terminal)"
    )
    set_.set_defaults(run=set_password)

    delete = sub.add_parser("delete", parents=both, help="delete a user's SCRAM credentials")
    delete.add_argument("user", metavar="USER")
    delete.add_argument(
        "--mechanism",
        action="append",
        choices=sorted(MECHANISMS),
        help="repeatable (default: every mechanism the user has)",
    )
    delete.set_defaults(run=delete_user)


def _check_name(user: str) -> str:
    if not user:
        raise UsageError("a user name must not be empty")
    return user


def read_password(given: str | None) -> str:
    """--password, else a prompt on a terminal (not echoed), else stdin's first line."""
    if given is not None:
        password = given
    elif sys.stdin.isatty():
        password = getpass.getpass("password: ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise UsageError("the password must not be empty")
    return password


def mechanism_name(mechanism: ScramMechanism) -> str:
    return mechanism.name.replace("_", "-")


def describe(client: Any, conn: Any, users: list[str]) -> dict[str, list[dict[str, Any]]]:
    """{user: [{mechanism, iterations}]}; an unknown user is Kafka's RESOURCE_NOT_FOUND."""
    if not users:
        future = client.describe_user_scram_credentials(request_timeout=conn.timeout)
        found = wait_named(future, conn, "cannot list users")
        descriptions = list(found.values())
    else:
        futures = client.describe_user_scram_credentials(users, request_timeout=conn.timeout)
        descriptions = [
            wait_named(future, conn, f"cannot describe user {user}")
            for user, future in futures.items()
        ]
    return {
        d.user: [
            {"mechanism": mechanism_name(info.mechanism), "iterations": info.iterations}
            for info in d.scram_credential_infos
        ]
        for d in sorted(descriptions, key=lambda d: d.user)
    }


def list_users(args: argparse.Namespace) -> int:
    users = [_check_name(user) for user in args.users]
    conn = connection(args)
    found = describe(admin_client(conn), conn, list(dict.fromkeys(users)))
    rows = [[user, c["mechanism"], c["iterations"]] for user, cs in found.items() for c in cs]
    emit(args.format, found, [(None, ["USER", "MECHANISM", "ITERATIONS"], rows)])
    return 0


def set_password(args: argparse.Namespace) -> int:
    user = _check_name(args.user)
    password = read_password(args.password)
    conn = connection(args)
    client = admin_client(conn)
    info = ScramCredentialInfo(MECHANISMS[args.mechanism], args.iterations)
    upsertion = UserScramCredentialUpsertion(user, info, password.encode())
    futures = client.alter_user_scram_credentials([upsertion], request_timeout=conn.timeout)
    wait_each(futures, conn, f"cannot set the password of {user}")
    result = {"user": user, "mechanism": args.mechanism, "iterations": args.iterations}
    rows = [list(result.values())]
    emit(args.format, result, [(None, ["USER", "MECHANISM", "ITERATIONS"], rows)])
    return 0


def delete_user(args: argparse.Namespace) -> int:
    user = _check_name(args.user)
    conn = connection(args)
    client = admin_client(conn)
    mechanisms = args.mechanism or [c["mechanism"] for c in describe(client, conn, [user])[user]]
    deletions = [
        UserScramCredentialDeletion(user, MECHANISMS[name]) for name in dict.fromkeys(mechanisms)
    ]
    futures = client.alter_user_scram_credentials(deletions, request_timeout=conn.timeout)
    wait_each(futures, conn, f"cannot delete user {user}")
    result = {"user": user, "deleted": list(dict.fromkeys(mechanisms))}
    rows = [[user, name] for name in result["deleted"]]
    emit(args.format, result, [(None, ["USER", "DELETED-MECHANISM"], rows)])
    return 0
