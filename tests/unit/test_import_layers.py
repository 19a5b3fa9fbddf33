"""Imports run one way, server -> apis -> broker -> storage, and never in a cycle (issue 22).

Every module under kafkalite/ is parsed with `ast`; every import counts: at the top, inside
functions and under `if TYPE_CHECKING:`. `from package import name` is an edge to the module
`package.name` when there is one, else to `package` (its `__init__`); importing a submodule
is not counted as importing its package's `__init__`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import kafkalite

ROOT = Path(kafkalite.__file__).parent

# Top to bottom: a module may import its own layer and the layers below, never one above.
# A module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, ...]] = [
    # Entry points: the command line, the server loop, the test harness and admin tools.
    (
        "kafkalite.__main__",
        "kafkalite.cli",
        "kafkalite.serve_command",
        "kafkalite.completion",
        "kafkalite.server",
        "kafkalite.acceptor",  # the server's accept loops
        "kafkalite.tls_stream",  # the server's TLS connections
        "kafkalite.pytest_plugin",
        "kafkalite.testing",
        "kafkalite.tools",
        "kafkalite.console",
    ),
    # The ZooKeeper implementation of the cluster (controller, kazoo): above the broker.
    ("kafkalite.cluster",),
    # One module per Kafka API: the handlers.
    ("kafkalite.apis",),
    # The scrape side of the metrics reads broker state; the server gives it the API names.
    ("kafkalite.metrics",),
    # ReplicaManager, Partition, AdminManager, coordinator services, replica fetchers.
    ("kafkalite.broker",),
    # Sans-IO state machines the broker drives.
    ("kafkalite.coordinator", "kafkalite.txn", "kafkalite.share"),
    # Segments, logs, the cleaner.
    ("kafkalite.storage",),
    # Importable by all: wire protocol helpers, config, process helpers, plain counters.
    (
        "kafkalite",
        "kafkalite.protocol",
        "kafkalite.config",
        "kafkalite.logging_config",
        "kafkalite.process",
        "kafkalite.maven_dist",
        "kafkalite.metrics.counters",
        "kafkalite.metrics.loop_time",  # the event loop's idle and handler seconds
        "kafkalite.metrics.topic_traffic",
        # sans-IO security: TLS contexts, SASL state machines, principals, SCRAM credentials
        "kafkalite.security",
    ),
]


def module_name(path: Path) -> str:
    parts = ["kafkalite", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imported(module: str, source: str, is_package: bool = False) -> Iterator[str]:
    """The kafkalite modules `module` imports anywhere in its source."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield from _known(submodule if submodule in MODULES else base)


def _known(name: str) -> Iterator[str]:
    """`name`, or the closest enclosing module we have, if it is kafkalite's."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    if name:
        yield name


def build_graph() -> dict[str, set[str]]:
    return {
        module: {
            target
            for target in imported(module, path.read_text(), path.name == "__init__.py")
            if target != module
        }
        for module, path in MODULES.items()
    }


GRAPH = build_graph()


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best[1]


def upward_imports() -> set[tuple[str, str]]:
    return {
        (module, target)
        for module, targets in GRAPH.items()
        for target in targets
        if layer_of(target) < layer_of(module)
    }


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Tarjan's algorithm, iterative: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def a_cycle(component: frozenset[str]) -> list[str]:
    """One concrete cycle through the component, to name in a failure."""
    start = min(component)
    path, seen = [start], {start}
    while True:
        targets = sorted(GRAPH[path[-1]] & component)
        back = [t for t in targets if t in seen]
        if back:
            return [*path[path.index(back[0]) :], back[0]]
        path.append(targets[0])
        seen.add(targets[0])


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_no_import_goes_up_a_layer() -> None:
    upward = upward_imports()
    assert not upward, (
        "imports against the layers (top to bottom: "
        + " > ".join(
            "/".join(p.removeprefix("kafkalite.") for p in prefixes) for prefixes in LAYERS
        )
        + "):\n"
        + "\n".join(f"  {a} -> {b}" for a, b in sorted(upward))
    )


def test_no_import_cycle() -> None:
    cycles = list(strongly_connected(GRAPH))
    assert not cycles, "import cycles:\n" + "\n".join(
        "  " + " -> ".join(a_cycle(c)) for c in cycles
    )


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [frozenset("abc")]),
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [frozenset("ab"), frozenset("cd")]),
    ],
)
def test_cycles_are_found(graph: dict[str, set[str]], expected: list[frozenset[str]]) -> None:
    assert sorted(strongly_connected(graph), key=sorted) == expected


def test_type_checking_function_level_and_relative_imports_count() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from kafkalite.broker.broker import Broker\n"
        "def f():\n"
        "    from kafkalite.apis import registry\n"
        "    import kafkalite.storage.log\n"
        "from . import base\n"
        "from .base import ApiHandler\n"
    )
    assert set(imported("kafkalite.apis.example", source)) == {
        "kafkalite.broker.broker",
        "kafkalite.apis.registry",
        "kafkalite.storage.log",
        "kafkalite.apis.base",
    }
