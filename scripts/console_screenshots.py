"""Take the README's console screenshots (docs/console-*.png) in headless Chromium.

    .venv/bin/python scripts/console_screenshots.py

Starts a broker and the console on free ports, writes a small demo data set (orders as
JSON with headers, a lagging consumer group with one live member, steady traffic for the
throughput chart), then opens each page and saves a PNG. Everything it starts is stopped.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from kafkalite.testing import BrokerProcess  # noqa: E402
from tests.integration.console_helpers import ConsoleProcess, chromium, wait_for  # noqa: E402
from tests.integration.e2e_helpers import admin, consumer, create_topic, producer  # noqa: E402
from tests.integration.metrics_helpers import base_url  # noqa: E402

DOCS = ROOT / "docs"


def seed(bootstrap: str) -> None:
    create_topic(bootstrap, "orders", partitions=3, config={"retention.ms": "604800000"})
    create_topic(bootstrap, "payments", partitions=2, config={"cleanup.policy": "compact"})
    client = producer(bootstrap)
    for i in range(120):
        order = {
            "order_id": 1000 + i,
            "customer": f"c-{i % 17}",
            "items": i % 4 + 1,
            "total_eur": round(9.5 * (i % 7 + 1), 2),
        }
        client.produce(
            "orders",
            key=f"c-{i % 17}",
            value=json.dumps(order),
            headers=[("source", b"web"), ("schema", b"order.v1")],
        )
        client.produce(
            "payments",
            key=f"p-{i % 40}",
            value=json.dumps(
                {"order_id": 1000 + i, "status": "paid", "method": ["card", "sepa"][i % 2]}
            ),
            headers=[("source", b"checkout"), ("trace-id", f"{i:08x}".encode())],
        )
    client.flush(30)
    parts = [TopicPartition("orders", p, 25 + 5 * p) for p in range(3)]
    admin(bootstrap).alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("invoicing", parts)]
    )["invoicing"].result(30)


def traffic(bootstrap: str, stop: threading.Event) -> None:
    client = producer(bootstrap)
    i = 0
    while not stop.is_set():
        for _ in range(40 + (i % 10) * 12):
            client.produce("orders", value=json.dumps({"order_id": 5000 + i, "items": 1}))
        client.poll(0)
        i += 1
        stop.wait(0.25)
    client.flush(30)


def shoot(browser, console: ConsoleProcess, route: str, name: str, before=None) -> None:  # noqa: ANN001
    browser.get(f"{console.url}/#/{route}")
    browser.refresh()
    wait_for(
        browser,
        lambda d: d.find_element(By.ID, "view").get_attribute("data-loaded") == f"#/{route}",
    )
    if before:
        before(browser)
    browser.save_screenshot(str(DOCS / f"console-{name}.png"))
    print(f"docs/console-{name}.png")


def main() -> None:
    with (
        tempfile.TemporaryDirectory() as data,
        BrokerProcess(Path(data), {"kafkalite.metrics.port": "0"}) as broker,
    ):
        seed(broker.bootstrap)
        member = consumer(broker.bootstrap, **{"group.id": "shipping", "client.id": "shipper-1"})
        member.subscribe(["payments"])
        while not member.assignment():
            member.poll(0.1)
        stop = threading.Event()
        sender = threading.Thread(target=traffic, args=(broker.bootstrap, stop))
        sender.start()
        browser = chromium(1400, 900)
        try:
            metrics = base_url(broker) + "/metrics"
            with ConsoleProcess(broker.bootstrap, "--metrics", metrics) as console:
                shoot(browser, console, "brokers", "brokers")
                shoot(browser, console, "topics", "topics")

                def load_messages(driver) -> None:  # noqa: ANN001
                    driver.find_element(By.ID, "msg-partition").send_keys("0")
                    limit = driver.find_element(By.ID, "msg-limit")
                    limit.clear()
                    limit.send_keys("4")
                    driver.find_element(By.ID, "msg-load").click()
                    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.message"))
                    driver.execute_script("window.scrollTo(0, 0)")

                browser.set_window_size(1400, 1250)
                shoot(browser, console, "topics/payments", "topic", load_messages)
                browser.set_window_size(1400, 900)
                shoot(browser, console, "groups", "groups")
                shoot(browser, console, "groups/invoicing", "group")
                shoot(
                    browser,
                    console,
                    "throughput",
                    "throughput",
                    lambda d: wait_for(
                        d,
                        lambda d: (
                            int(d.find_element(By.ID, "view").get_attribute("data-samples") or 0)
                            >= 20
                        ),
                        timeout=60,
                    ),
                )
        finally:
            browser.quit()
            stop.set()
            sender.join()
            member.close()


if __name__ == "__main__":
    time.sleep(0)
    main()
