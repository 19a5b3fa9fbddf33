"""kafkalite: a Kafka-compatible broker in Python.

kio (the protocol structs) imports hypothesis whenever it is installed, to register test
strategies for its primitive types: 0.6-0.8 s of CPU (hypothesis and, through trio's
hypothesis plugin, pytest) in every broker and CLI process of a development install. The first
kafkalite import loads kio's phantom-type base with hypothesis hidden, so kio registers none.
A process that imported hypothesis before kafkalite (a test run) keeps kio's strategies.
"""

import sys


def _import_kio_without_hypothesis() -> None:
    if "hypothesis" in sys.modules or "kio.static._phantom" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # `import hypothesis` fails
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


_import_kio_without_hypothesis()
