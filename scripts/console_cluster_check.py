"""The web console against a 3-broker cluster with brokers killed, in headless Chromium.

    PYTHONPATH=. .venv/bin/python scripts/console_cluster_check.py

Kept out of the default test run (ZooKeeper and three brokers cost tens of seconds); the
console's health rules are unit-tested in tests/unit/test_console_health.py. Starts ZooKeeper,
brokers 1-3, a topic with replication 3 and min.insync.replicas=2, and the console; kills
broker 3 (its partitions become under-replicated, it stays listed offline), then broker 2
(under min ISR). Each step is checked in the JSON API and in the page. Exit code 0 when all
hold; everything started is stopped.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from selenium.webdriver.common.by import By  # noqa: E402

from kafkalite.cluster.zookeeper_server import ZooKeeperServer  # noqa: E402
from kafkalite.testing import BrokerProcess, stop_all  # noqa: E402
from tests.integration.console_helpers import ConsoleProcess, chromium, wait_for  # noqa: E402
from tests.integration.e2e_helpers import admin  # noqa: E402

TOPIC = "replicated"


def get(console: ConsoleProcess, path: str) -> Any:
    with urllib.request.urlopen(console.url + path, timeout=60) as answer:
        return json.loads(answer.read())


def until(condition: Callable[[], Any], what: str, wait: float = 60.0) -> Any:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def brokers_page(browser: Any, console: ConsoleProcess) -> dict[str, str]:
    browser.get(f"{console.url}/#/brokers")
    browser.refresh()
    wait_for(browser, lambda d: d.find_element(By.ID, "view").get_attribute("data-loaded"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#brokers tr[data-broker]")
    return {
        r.get_attribute("data-broker"): r.find_element(By.CSS_SELECTOR, ".status").text
        for r in rows
    }


def card(browser: Any, card_id: str) -> str:
    return browser.find_element(By.ID, card_id).text


def check(zk_connect: str, work: Path) -> None:
    brokers: dict[int, BrokerProcess] = {}
    try:
        for broker_id in (1, 2, 3):
            config = {
                "broker.id": str(broker_id),
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": "4000",
            }
            brokers[broker_id] = BrokerProcess(work / f"broker-{broker_id}", config).start()
        bootstrap = brokers[1].bootstrap
        until(lambda: len(admin(bootstrap).list_topics(timeout=10).brokers) == 3, "3 brokers")
        from confluent_kafka.admin import NewTopic

        new = NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})
        admin(bootstrap).create_topics([new])[TOPIC].result(30)
        with ConsoleProcess(bootstrap) as console:
            browser = chromium()
            try:
                healthy = get(console, "/api/cluster")
                assert healthy["partitions"] == dict.fromkeys(
                    ("offline", "under_min_isr", "under_replicated"), 0
                ), healthy
                assert brokers_page(browser, console) == {
                    "1": "online",
                    "2": "online",
                    "3": "online",
                }
                print("3 brokers online, no partition flagged")

                brokers[3].kill()
                lost_one = until(
                    lambda: (
                        (c := get(console, "/api/cluster"))["partitions"]["under_replicated"] == 3
                        and [(b["id"], b["online"]) for b in c["brokers"]]
                        == [(1, True), (2, True), (3, False)]
                        and c
                    ),
                    "broker 3 offline and 3 under-replicated partitions",
                )
                assert lost_one["partitions"]["under_min_isr"] == 0, lost_one
                assert brokers_page(browser, console) == {
                    "1": "online",
                    "2": "online",
                    "3": "offline",
                }
                assert card(browser, "offline-brokers") == "1"
                assert card(browser, "under-replicated") == "3"
                print("broker 3 killed: listed offline, 3 partitions under-replicated")

                brokers[2].kill()
                until(
                    lambda: (
                        (c := get(console, "/api/cluster"))["partitions"]["under_min_isr"] == 3
                        and [b["online"] for b in c["brokers"]] == [True, False, False]
                    ),
                    "broker 2 offline and 3 partitions under min ISR",
                )
                assert brokers_page(browser, console)["2"] == "offline"
                assert card(browser, "under-min-isr") == "3"
                browser.get(f"{console.url}/#/topics/{TOPIC}")
                browser.refresh()
                wait_for(
                    browser, lambda d: d.find_element(By.ID, "view").get_attribute("data-loaded")
                )
                rows = browser.find_elements(By.CSS_SELECTOR, "#partitions tr[data-partition]")
                assert [r.get_attribute("class") for r in rows] == ["unhealthy"] * 3
                print("broker 2 killed: 3 partitions under min ISR, highlighted on the topic page")
            finally:
                browser.quit()
    finally:
        stop_all(brokers.values())


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="console-cluster-") as work:
        zookeeper = ZooKeeperServer(Path(work) / "zookeeper").start()
        try:
            started = time.monotonic()
            check(f"{zookeeper.connect_string}/console", Path(work))
            print(f"ok in {time.monotonic() - started:.1f}s")
        finally:
            zookeeper.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
