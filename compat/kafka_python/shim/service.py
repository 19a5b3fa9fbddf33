"""Stand-in for kafka-python's test/service.py, which its sdist does not ship.

Written for kafkalite's compat runner: only the external-broker path is supported
(KAFKA_URI), so nothing here spawns a process.
"""

import logging

log = logging.getLogger(__name__)


class ExternalService:
    def __init__(self, host, port):
        self.host = host
        self.port = port

    def start(self):
        pass

    def stop(self):
        pass

    def dump_logs(self):
        log.info("external broker %s:%s: no logs to dump", self.host, self.port)

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            "kafkalite compat runner: spawning brokers is not supported, set KAFKA_URI"
        )
