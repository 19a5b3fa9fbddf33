"""The admin command line beside `serve`:
`kafkalite topic|group|produce|consume|cluster|config|log-dirs|acl|user|quota`.

Every command talks the Kafka protocol through confluent-kafka (AdminClient, Producer,
Consumer), so it works against any Kafka-compatible cluster. One module per command group;
each has `register(commands, parents)` adding its subcommands (which set `run`) to the parser.
"""

from __future__ import annotations

import argparse
import os
import sys

from confluent_kafka import KafkaException

from kafkalite.tools import (
    acl,
    cluster,
    config_cmd,
    consume,
    group,
    log_dirs,
    produce,
    quota,
    topic,
    user,
)
from kafkalite.tools.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ToolError,
    connection_parent,
    error_text,
    output_parent,
)

_GROUPS = (topic, group, produce, consume, cluster, config_cmd, log_dirs, acl, user, quota)


def register(commands: argparse._SubParsersAction, parser_class: type) -> None:
    parents = {"connection": connection_parent(), "output": output_parent()}
    for module in _GROUPS:
        module.register(commands, parents, parser_class)


def run(args: argparse.Namespace) -> int:
    """Run a tool command: its exit code, or one line on stderr and 1 (2 for bad input)."""
    try:
        return args.run(args)
    except ToolError as exc:
        sys.stderr.write(f"kafkalite: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("kafkalite: interrupted\n")
        return 130
    except BrokenPipeError:  # `kafkalite consume t | head`: quiet, also at interpreter exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KafkaException as exc:  # a client call outside the commands' own error handling
        sys.stderr.write(f"kafkalite: {error_text(exc)}\n")
        return EXIT_FAILURE
    except Exception as exc:  # a bug: still one line, as for every other failure
        sys.stderr.write(f"kafkalite: unexpected {type(exc).__name__}: {exc}\n")
        return EXIT_FAILURE


__all__ = ["EXIT_USAGE", "register", "run"]
