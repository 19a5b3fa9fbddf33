"""The web console end to end: a real broker, `kafkalite console`, headless Chromium.

Each test writes through confluent-kafka, reads the page in the browser and compares what it
shows with what was written; actions taken in the page are checked through the AdminClient.
"""

from __future__ import annotations

import datetime
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupTopicPartitions,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from kafkalite.testing import BrokerProcess
from tests.integration.console_helpers import ConsoleProcess, chromium, wait_for
from tests.integration.e2e_helpers import (
    CLIENT_TIMEOUT,
    admin,
    consumer,
    create_topic,
    producer,
    segment_files,
)
from tests.integration.metrics_helpers import base_url


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("console-broker")
    with BrokerProcess(data_dir, {"kafkalite.metrics.port": "0"}) as process:
        yield process


@pytest.fixture(scope="module")
def console(broker: BrokerProcess) -> Iterator[ConsoleProcess]:
    metrics = base_url(broker) + "/metrics"  # partition sizes come from there
    with ConsoleProcess(broker.bootstrap, "--metrics", metrics) as process:
        yield process


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def open_page(browser: WebDriver, console: ConsoleProcess, route: str) -> None:
    """Load `route` and wait until the page rendered it (app.js marks main#view)."""
    browser.get(f"{console.url}/#/{route}")
    browser.refresh()  # a hash-only change would not reload the page between tests
    wait_for(
        browser,
        lambda d: d.find_element(By.ID, "view").get_attribute("data-loaded") == f"#/{route}",
        message=f"page #{route}",
    )


def text(browser: WebDriver, css: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, css).text


def text_now(browser: WebDriver, css: str) -> str | None:
    """An element's text read in one step (the page may be re-rendering it)."""
    return browser.execute_script(
        "return document.querySelector(arguments[0])?.textContent ?? null", css
    )


def produce(bootstrap: str, topic: str, records: list[dict], **kwargs: object) -> None:
    client = producer(bootstrap)
    for record in records:
        client.produce(topic, **record, **kwargs)
    assert client.flush(CLIENT_TIMEOUT) == 0


def confirm(browser: WebDriver, answer: str = "yes") -> None:
    wait_for(browser, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None)
    browser.find_element(By.ID, f"confirm-{answer}").click()


def committed(bootstrap: str, group: str) -> dict[int, int]:
    futures = admin(bootstrap).list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    return {
        tp.partition: tp.offset for tp in futures[group].result(CLIENT_TIMEOUT).topic_partitions
    }


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    parts = [TopicPartition(topic, p, o) for p, o in offsets.items()]
    futures = admin(bootstrap).alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, parts)]
    )
    futures[group].result(CLIENT_TIMEOUT)


def http(
    console: ConsoleProcess, method: str, path: str, body: object = None
) -> tuple[int, object]:
    """One call of the console's JSON API: (status, decoded answer)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(console.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def read(bootstrap: str, topic: str, partition: int, count: int) -> list:
    """The first `count` messages of a partition, through a plain consumer."""
    reader = consumer(bootstrap)
    try:
        reader.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        found: list = []
        deadline = time.monotonic() + CLIENT_TIMEOUT
        while len(found) < count and time.monotonic() < deadline:
            message = reader.poll(0.1)
            if message is not None and not message.error():
                found.append(message)
        return found
    finally:
        reader.close()


def overrides(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's configs that are not defaults."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin(bootstrap).describe_configs([resource])[resource].result(CLIENT_TIMEOUT)
    return {e.name: e.value for e in entries.values() if not e.is_default}


def test_brokers_page_shows_the_cluster(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    cluster = admin(broker.bootstrap).describe_cluster().result(CLIENT_TIMEOUT)
    open_page(browser, console, "brokers")
    assert text(browser, "#cluster-id") == cluster.cluster_id
    assert text(browser, "#broker-count") == "1"
    row = browser.find_element(By.CSS_SELECTOR, "#brokers tr[data-broker='0']")
    assert row.find_element(By.CSS_SELECTOR, ".port").text == str(broker.port)
    assert "controller" in row.text
    assert row.find_element(By.CSS_SELECTOR, ".status").text == "online"
    assert text(browser, "#offline-brokers") == "0"


def test_topics_page_lists_partitions_and_message_counts(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    topic = unique("orders")
    create_topic(broker.bootstrap, topic, partitions=3)
    produce(broker.bootstrap, topic, [{"value": b"x", "partition": i % 3} for i in range(17)])
    open_page(browser, console, "topics")
    row = browser.find_element(By.CSS_SELECTOR, f"#topics tr[data-topic='{topic}']")
    assert row.find_element(By.CSS_SELECTOR, ".partitions").text == "3"
    assert row.find_element(By.CSS_SELECTOR, ".messages").text == "17"
    on_disk = [
        sum(f.stat().st_size for f in segment_files(broker.data_dir, topic, p)) for p in range(3)
    ]
    assert row.find_element(By.CSS_SELECTOR, ".size").get_attribute("data-bytes") == str(
        sum(on_disk)
    )

    open_page(browser, console, f"topics/{topic}")
    ends = [
        browser.find_element(By.CSS_SELECTOR, f"#partitions tr[data-partition='{p}'] .end").text
        for p in range(3)
    ]
    assert ends == ["6", "6", "5"]
    sizes = [
        browser.find_element(
            By.CSS_SELECTOR, f"#partitions tr[data-partition='{p}'] .size"
        ).get_attribute("data-bytes")
        for p in range(3)
    ]
    assert sizes == [str(size) for size in on_disk]
    assert text(browser, "#message-count") == "17"


def test_a_delayed_topic_shows_its_held_records_and_when_the_next_is_due(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    topic = unique("later")
    create_topic(
        broker.bootstrap, topic, partitions=2, config={"kafkalite.delayed.delivery.enable": "true"}
    )
    delay = [("kafkalite-delay-ms", b"600000")]
    produce(broker.bootstrap, topic, [{"value": b"v", "partition": 1, "headers": delay}] * 2)
    open_page(browser, console, f"topics/{topic}")
    held = [text(browser, f"#partitions tr[data-partition='{p}'] .held") for p in (0, 1)]
    assert held == ["0", "2"]
    assert text(browser, "#partitions tr[data-partition='0'] .next-due") == "–"
    assert text(browser, "#partitions tr[data-partition='1'] .next-due").endswith("Z")
    assert not browser.find_elements(By.CSS_SELECTOR, "#partitions .local-start")  # not tiered


def test_a_view_shows_its_source_and_filter(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    source, view = unique("orders"), unique("orders-eu")
    create_topic(broker.bootstrap, source, partitions=1)
    create_topic(
        broker.bootstrap,
        view,
        partitions=1,
        config={"kafkalite.view.source": source, "kafkalite.view.filter": "region = 'eu'"},
    )
    open_page(browser, console, "topics")
    row = browser.find_element(By.CSS_SELECTOR, f"#topics tr[data-topic='{view}']")
    marked = row.find_element(By.CSS_SELECTOR, ".view-of").text
    assert marked == f"(view of {source}: region = 'eu')"
    plain = browser.find_element(By.CSS_SELECTOR, f"#topics tr[data-topic='{source}']")
    assert not plain.find_elements(By.CSS_SELECTOR, ".view-of")

    open_page(browser, console, f"topics/{view}")
    assert text(browser, "#view-of") == source
    assert text(browser, "#view-filter") == "region = 'eu'"


def test_topic_configs_and_message_browser(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    topic = unique("events")
    create_topic(broker.bootstrap, topic, config={"retention.ms": "123456789"})
    base = int(time.time() * 1000) - 60_000
    events = [{"id": i, "kind": "click", "tags": ["a", "b"]} for i in range(12)]
    produce(
        broker.bootstrap,
        topic,
        [
            {
                "key": f"user-{i}".encode(),
                "value": json.dumps(event).encode(),
                "headers": [("source", b"web"), ("trace", f"t{i}".encode())],
                "timestamp": base + i * 1000,
            }
            for i, event in enumerate(events)
        ],
    )
    open_page(browser, console, f"topics/{topic}")
    config = browser.find_element(By.CSS_SELECTOR, "#configs tr[data-config='retention.ms']")
    assert config.find_element(By.CSS_SELECTOR, ".value").text == "123456789"

    def load(
        mode: str,
        limit: int,
        offset: int | None = None,
        at_ms: int | None = None,
        contains: str = "",
        order: str = "oldest",
    ) -> list:
        Select(browser.find_element(By.ID, "msg-mode")).select_by_value(mode)
        Select(browser.find_element(By.ID, "msg-order")).select_by_value(order)
        limit_box = browser.find_element(By.ID, "msg-limit")
        limit_box.clear()
        limit_box.send_keys(str(limit))
        search = browser.find_element(By.ID, "msg-contains")
        search.clear()
        search.send_keys(contains)
        if offset is not None:
            box = browser.find_element(By.ID, "msg-offset")
            box.clear()
            box.send_keys(str(offset))
        if at_ms is not None:  # datetime-local takes local time: let the browser convert
            browser.execute_script(
                "const d = new Date(arguments[1]);"
                "arguments[0].value = new Date(d - d.getTimezoneOffset() * 60000)"
                ".toISOString().slice(0, 19);",
                browser.find_element(By.ID, "msg-time"),
                at_ms,
            )
        return click_and_read("msg-load")

    def click_and_read(button: str) -> list:
        browser.execute_script("document.getElementById('messages-box').dataset.loaded = ''")
        browser.find_element(By.ID, button).click()
        wait_for(
            browser,
            lambda d: d.find_element(By.ID, "messages-box").get_attribute("data-loaded") == "yes",
        )
        return browser.find_elements(By.CSS_SELECTOR, "#messages tr.message")

    def offsets(rows: list) -> list[int]:
        return [int(r.find_element(By.CSS_SELECTOR, ".offset").text) for r in rows]

    rows = load("latest", 5)
    assert [r.find_element(By.CSS_SELECTOR, ".offset").text for r in rows] == [
        "7",
        "8",
        "9",
        "10",
        "11",
    ]
    last = rows[-1]
    assert last.find_element(By.CSS_SELECTOR, ".key").text == "user-11"
    assert last.find_element(By.CSS_SELECTOR, ".value pre").text == json.dumps(events[11], indent=2)
    assert last.find_element(By.CSS_SELECTOR, ".headers").text.splitlines() == [
        "source: web",
        "trace: t11",
    ]

    assert offsets(load("latest", 5, order="newest")) == [11, 10, 9, 8, 7]
    assert offsets(click_and_read("msg-next")) == [6, 5, 4, 3, 2]
    assert offsets(click_and_read("msg-next")) == [1, 0]
    assert text(browser, "#messages-count") == "Page 3: 2 message(s) last page"
    assert offsets(load("offset", 5, offset=3)) == [3, 4, 5, 6, 7]
    assert offsets(click_and_read("msg-next")) == [8, 9, 10, 11]

    rows = load("offset", 3, offset=2)
    assert [r.find_element(By.CSS_SELECTOR, ".key").text for r in rows] == [
        "user-2",
        "user-3",
        "user-4",
    ]

    rows = load("time", 2, at_ms=base + 5000)
    assert [r.find_element(By.CSS_SELECTOR, ".offset").text for r in rows] == ["5", "6"]

    rows = load("latest", 5, contains="t10")  # a header value: only message 10 has it
    assert [r.find_element(By.CSS_SELECTOR, ".offset").text for r in rows] == ["10"]
    rows = load("offset", 3, offset=0, contains='"id": 1')  # ids 1, 10 and 11 hold it
    assert [r.find_element(By.CSS_SELECTOR, ".key").text for r in rows] == [
        "user-1",
        "user-10",
        "user-11",
    ]


def test_groups_show_members_and_lag(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    topic, fresh, group = unique("lagging"), unique("fresh"), unique("billing")
    create_topic(broker.bootstrap, topic, partitions=2)
    create_topic(broker.bootstrap, fresh)
    produce(broker.bootstrap, topic, [{"value": b"v", "partition": i % 2} for i in range(20)])
    produce(broker.bootstrap, fresh, [{"value": b"v"} for _ in range(3)])
    commit(broker.bootstrap, group, topic, {0: 4, 1: 9})

    open_page(browser, console, "groups")
    row = browser.find_element(By.CSS_SELECTOR, f"#groups tr[data-group='{group}']")
    assert row.find_element(By.CSS_SELECTOR, ".lag").text == "7"  # (10-4) + (10-9)
    assert row.find_element(By.CSS_SELECTOR, ".members").text == "0"

    member = consumer(broker.bootstrap, **{"group.id": group, "client.id": "console-member"})
    try:
        member.subscribe([topic, fresh])
        deadline = time.monotonic() + CLIENT_TIMEOUT
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.1)
        assert len(member.assignment()) == 3
        open_page(browser, console, f"groups/{group}")
        assert text(browser, "#group-state") == "STABLE"
        assert text(browser, "#members .client") == "console-member"
        assigned = text(browser, "#members .assignment").split(", ")
        assert sorted(assigned) == sorted([f"{topic}-0", f"{topic}-1", f"{fresh}-0"])
        lags = [text(browser, f"#offsets tr[data-tp='{topic}-{p}'] .lag") for p in range(2)]
        assert lags == ["6", "1"]
        # Assigned, never committed: shown without a committed offset or lag, like Kafka's tool.
        never = browser.find_element(By.CSS_SELECTOR, f"#offsets tr[data-tp='{fresh}-0']")
        cells = [
            never.find_element(By.CSS_SELECTOR, f".{c}").text for c in ("committed", "end", "lag")
        ]
        assert cells == ["–", "3", "–"]
        assert text(browser, "#group-lag") == "7"
        status, answer = http(console, "DELETE", f"/api/groups/{group}")  # Kafka refuses
        assert status == 409 and answer["error"].startswith("NON_EMPTY_GROUP"), answer
    finally:
        member.close()


def test_a_share_group_shows_its_members_start_offsets_and_lag(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    topic, group = unique("jobs"), unique("workers")
    create_topic(broker.bootstrap, topic)
    earliest = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin(broker.bootstrap).incremental_alter_configs([earliest])[earliest].result(CLIENT_TIMEOUT)
    produce(broker.bootstrap, topic, [{"value": b"v"} for _ in range(6)])
    member = ShareConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "share-member"}
    )
    try:
        member.subscribe([topic])
        received, deadline = 0, time.monotonic() + CLIENT_TIMEOUT
        # Its next poll accepts what the last returned: poll until the console shows all six
        # acknowledged (the start offset at 6, no lag).
        while received < 6 or http(console, "GET", f"/api/groups/{group}")[1]["lag"] != 0:  # type: ignore[index]
            assert time.monotonic() < deadline, f"received {received}"
            received += sum(1 for m in member.poll(0.2) if m.error() is None)
        open_page(browser, console, "groups")
        row = browser.find_element(By.CSS_SELECTOR, f"#groups tr[data-group='{group}']")
        assert row.find_element(By.CSS_SELECTOR, ".type").text == "share"
        assert row.find_element(By.CSS_SELECTOR, ".members").text == "1"
        open_page(browser, console, f"groups/{group}")
        assert text(browser, "#view h2") == f"Share group {group}"
        assert text(browser, "#group-state") == "STABLE"
        assert text(browser, "#members .client") == "share-member"
        assert text(browser, "#members .assignment") == f"{topic}-0"
        assert text(browser, f"#offsets tr[data-tp='{topic}-0'] .start") == "6"
        assert text(browser, f"#offsets tr[data-tp='{topic}-0'] .lag") == "0"
    finally:
        member.close()


def test_reset_offsets_asks_then_takes_effect(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    topic, group = unique("replay"), unique("audit")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [{"value": b"v"} for _ in range(8)])
    commit(broker.bootstrap, group, topic, {0: 6})
    open_page(browser, console, f"groups/{group}")
    Select(browser.find_element(By.ID, "reset-to")).select_by_value("earliest")

    browser.find_element(By.ID, "reset-go").click()
    confirm(browser, "no")
    assert committed(broker.bootstrap, group) == {0: 6}

    browser.find_element(By.ID, "reset-go").click()
    confirm(browser, "yes")
    wait_for(browser, lambda d: d.find_element(By.ID, "notice").is_displayed())
    assert committed(broker.bootstrap, group) == {0: 0}
    wait_for(browser, lambda d: text_now(d, "#group-lag") == "8")

    Select(browser.find_element(By.ID, "reset-to")).select_by_value("shift")
    shift = browser.find_element(By.ID, "reset-shift")
    shift.clear()
    shift.send_keys("5")
    browser.find_element(By.ID, "reset-go").click()
    confirm(browser, "yes")
    wait_for(browser, lambda d: text_now(d, "#group-lag") == "3")
    assert committed(broker.bootstrap, group) == {0: 5}

    browser.find_element(By.ID, "delete-group").click()
    confirm(browser, "yes")
    wait_for(browser, lambda d: text_now(d, "#view h2") == "Groups")
    assert text(browser, "#notice") == f"Group {group} deleted"
    assert not browser.find_elements(By.CSS_SELECTOR, f"tr[data-group='{group}']")


def test_create_and_delete_topic_from_the_page(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    topic = unique("made-in-browser")
    open_page(browser, console, "topics")
    browser.find_element(By.ID, "topic-name").send_keys(topic)
    partitions = browser.find_element(By.ID, "topic-partitions")
    partitions.clear()
    partitions.send_keys("4")
    browser.find_element(By.ID, "topic-create").click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f"tr[data-topic='{topic}']"))
    metadata = admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT)
    assert len(metadata.topics[topic].partitions) == 4

    open_page(browser, console, f"topics/{topic}")
    browser.find_element(By.ID, "delete-topic").click()
    confirm(browser, "no")
    assert topic in admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT).topics
    browser.find_element(By.ID, "delete-topic").click()
    confirm(browser, "yes")
    wait_for(
        browser, lambda d: d.find_element(By.ID, "view").get_attribute("data-loaded") == "#/topics"
    )
    assert topic not in admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT).topics
    assert not browser.find_elements(By.CSS_SELECTOR, f"tr[data-topic='{topic}']")
    assert text(browser, "#notice") == f"Topic {topic} deleted"


def test_throughput_chart_follows_new_messages(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    open_page(browser, console, "throughput")
    # The first sample is the baseline the page measures the next ones against.
    wait_for(browser, lambda d: d.find_element(By.ID, "view").get_attribute("data-samples"))
    topic = unique("live")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [{"value": b"v"} for _ in range(250)])
    metadata = admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT)
    expected = 0
    for name, meta in metadata.topics.items():
        if not name.startswith("__"):
            for partition in meta.partitions:
                probe = consumer(broker.bootstrap)
                expected += probe.get_watermark_offsets(TopicPartition(name, partition))[1]
                probe.close()
    wait_for(browser, lambda d: d.find_element(By.ID, "total-end").text == f"{expected:,}")
    assert float(browser.find_element(By.ID, "chart").get_attribute("data-peak")) > 0
    row = f"#topic-rate-table tr[data-topic='{topic}'] .end"
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, row).text == "250")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--port", "70000"], "argument --port: port 70000 is out of range 0-65535"),
        (["--port", "http"], "argument --port: invalid port 'http'"),
        (
            ["--bootstrap", "nohost"],
            "argument -b/--bootstrap: bootstrap address 'nohost' is not host:port",
        ),
        (["--timeout", "0"], "argument --timeout: timeout must be a positive number, got '0'"),
        (
            ["--metrics", "localhost:9404"],
            "argument --metrics: metrics URL 'localhost:9404' is not http(s)://host:port/path",
        ),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_console_bad_arguments_one_line_exit_2(args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafkalite", "console", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == f"kafkalite: {message}\n"
    assert result.stdout == ""


def test_console_port_in_use_exit_2(console: ConsoleProcess, broker: BrokerProcess) -> None:
    port = console.url.rsplit(":", 1)[1]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkalite",
            "console",
            "--bootstrap",
            broker.bootstrap,
            "--port",
            port,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"kafkalite: cannot listen on 127.0.0.1:{port}: ")
    assert result.stderr.count("\n") == 1


def test_console_without_a_broker_exit_1_naming_it() -> None:
    with socket.socket() as probe:  # bound, never listening: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "kafkalite",
                "console",
                "--bootstrap",
                f"127.0.0.1:{port}",
                "--port",
                "0",
                "--timeout",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert result.stderr == f"kafkalite: no Kafka broker answered at 127.0.0.1:{port} within 2s\n"


def test_favicon_is_served(console: ConsoleProcess) -> None:
    with urllib.request.urlopen(console.url + "/favicon.ico", timeout=60) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"] == "image/svg+xml"
        assert answer.read().startswith(b"<svg")
    with urllib.request.urlopen(console.url + "/", timeout=60) as answer:
        assert b'<link rel="icon" href="/static/favicon.svg"' in answer.read()


def test_ctrl_c_stops_the_console_quietly(broker: BrokerProcess) -> None:
    process = ConsoleProcess(broker.bootstrap).start()
    try:
        with urllib.request.urlopen(process.url + "/", timeout=60) as answer:
            assert answer.status == 200  # serving: uvicorn's signal handlers are in place
        assert process.process is not None
        process.process.send_signal(signal.SIGINT)
        assert process.exit_code() == 0
    finally:
        process.stop()
    assert [line for line in process.lines if "kafkalite console on" not in line] == []


def test_produce_over_http(broker: BrokerProcess, console: ConsoleProcess) -> None:
    topic = unique("produced")
    create_topic(broker.bootstrap, topic, partitions=2)
    path = f"/api/topics/{topic}/messages"
    message = {
        "partition": 1,
        "key": "k1",
        "value": '{"a": 1}',
        "headers": [["source", "console"], ["raw", {"base64": "AP8="}], ["none", None]],
    }
    assert http(console, "POST", path, message)[1] == {
        "partition": 1,
        "offset": 0,
        "timestamp": http(console, "GET", f"{path}?partition=1")[1]["messages"][0]["timestamp"],
    }
    status, anywhere = http(console, "POST", path, {"value": {"base64": "AAE="}, "key": None})
    assert status == 200
    written = read(broker.bootstrap, topic, 1, 1 + (anywhere["partition"] == 1))
    assert (written[0].key(), written[0].value()) == (b"k1", b'{"a": 1}')
    assert written[0].headers() == [("source", b"console"), ("raw", b"\x00\xff"), ("none", None)]
    [binary] = read(broker.bootstrap, topic, anywhere["partition"], anywhere["offset"] + 1)[-1:]
    assert (binary.key(), binary.value(), binary.headers()) == (None, b"\x00\x01", None)

    assert http(console, "POST", path, {"value": "v", "partition": 2}) == (
        400,
        {"error": f"topic '{topic}' has no partition 2"},
    )
    assert http(console, "POST", path, {"value": {"base64": "!"}})[0] == 400
    missing = unique("missing")
    assert http(console, "POST", f"/api/topics/{missing}/messages", {"value": "v"}) == (
        404,
        {"error": f"topic '{missing}' does not exist"},
    )
    assert missing not in admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT).topics


def test_create_topic_with_configs_and_alter_them_over_http(
    broker: BrokerProcess, console: ConsoleProcess
) -> None:
    topic = unique("configured")
    made = {"retention.ms": "7200000", "cleanup.policy": "compact"}
    body = {"name": topic, "partitions": 2, "configs": made}
    assert http(console, "POST", "/api/topics", body) == (200, {"ok": True})
    assert overrides(broker.bootstrap, topic) == made

    change = {"set": {"retention.ms": "3600000"}, "delete": ["cleanup.policy"]}
    assert http(console, "POST", f"/api/topics/{topic}/configs", change) == (200, {"ok": True})
    assert overrides(broker.bootstrap, topic) == {"retention.ms": "3600000"}

    status, answer = http(
        console, "POST", f"/api/topics/{topic}/configs", {"set": {"no.such.config": "1"}}
    )
    assert status == 409 and "no.such.config" in answer["error"]
    assert http(console, "POST", f"/api/topics/{topic}/configs", {}) == (
        400,
        {"error": "nothing to set or delete"},
    )
    assert overrides(broker.bootstrap, topic) == {"retention.ms": "3600000"}


def test_produce_and_edit_configs_from_the_page(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    topic = unique("page-made")
    open_page(browser, console, "topics")
    browser.find_element(By.ID, "topic-name").send_keys(topic)
    partitions = browser.find_element(By.ID, "topic-partitions")
    partitions.clear()
    partitions.send_keys("3")
    browser.find_element(By.ID, "topic-configs").send_keys("retention.ms=7200000\n")
    browser.find_element(By.ID, "topic-create").click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f"tr[data-topic='{topic}']"))
    assert overrides(broker.bootstrap, topic) == {"retention.ms": "7200000"}

    open_page(browser, console, f"topics/{topic}")
    Select(browser.find_element(By.ID, "produce-partition")).select_by_value("2")
    browser.find_element(By.ID, "produce-key").send_keys("order-7")
    browser.find_element(By.ID, "produce-value").send_keys("shipped")
    browser.find_element(By.ID, "produce-headers").send_keys("trace: abc\nsource: page")
    browser.find_element(By.ID, "produce-send").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "notice").is_displayed())
    assert text(browser, "#notice") == "Message written to partition 2 at offset 0"
    [written] = read(broker.bootstrap, topic, 2, 1)
    assert (written.key(), written.value()) == (b"order-7", b"shipped")
    assert written.headers() == [("trace", b"abc"), ("source", b"page")]

    browser.find_element(By.CSS_SELECTOR, "#configs tr[data-config='retention.ms']").click()
    assert browser.find_element(By.ID, "config-value").get_attribute("value") == "7200000"
    value = browser.find_element(By.ID, "config-value")
    value.clear()
    value.send_keys("3600000")
    browser.find_element(By.ID, "config-set").click()
    row = "#configs tr[data-config='retention.ms'] .value"
    wait_for(browser, lambda d: text_now(d, row) == "3600000")
    assert overrides(broker.bootstrap, topic) == {"retention.ms": "3600000"}
    browser.find_element(By.CSS_SELECTOR, "#configs tr[data-config='retention.ms']").click()
    browser.find_element(By.ID, "config-reset").click()
    wait_for(browser, lambda d: text_now(d, row) not in (None, "3600000"))
    assert overrides(broker.bootstrap, topic) == {}

    # Deleted by someone else while viewed: the next action says so and goes back to the list.
    admin(broker.bootstrap).delete_topics([topic])[topic].result(CLIENT_TIMEOUT)
    browser.find_element(By.ID, "produce-send").click()
    wait_for(
        browser, lambda d: d.find_element(By.ID, "view").get_attribute("data-loaded") == "#/topics"
    )
    assert text(browser, "#notice") == f"Topic {topic} was deleted"


def test_message_pages_beyond_1000_newest_first(
    broker: BrokerProcess, console: ConsoleProcess
) -> None:
    topic, count = unique("paged"), 2500
    create_topic(broker.bootstrap, topic, partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    records = [
        {"value": str(i).encode(), "partition": i % 2, "timestamp": base + i} for i in range(count)
    ]
    produce(broker.bootstrap, topic, records)

    def pages(query: str) -> list[list[int]]:
        """Every page's values, following `next` to the last page."""
        found, cursor = [], ""
        while True:
            status, page = http(console, "GET", f"/api/topics/{topic}/messages?{query}{cursor}")
            assert status == 200, page
            found.append([int(m["value"]["text"]) for m in page["messages"]])
            if page["next"] is None:
                return found
            cursor = f"&cursor={page['next']}"

    newest = pages("mode=latest&order=newest&limit=1000")
    assert [len(page) for page in newest] == [1000, 1000, 500]
    assert sum(newest, []) == list(reversed(range(count)))
    oldest = pages("mode=offset&offset=0&order=oldest&limit=5000")  # capped at 1000 a page
    assert [len(page) for page in oldest] == [1000, 1000, 500]
    assert sum(oldest, []) == list(range(count))
    one = pages("mode=latest&order=newest&limit=1000&partition=1")
    assert [len(page) for page in one] == [1000, 250]
    assert sum(one, []) == list(reversed(range(1, count, 2)))
    assert http(console, "GET", f"/api/topics/{topic}/messages?cursor=0-1") == (
        400,
        {"error": "cursor must be partition:offset,..., got '0-1'"},
    )


def test_partitions_under_min_isr_are_flagged(
    broker: BrokerProcess, console: ConsoleProcess, browser: WebDriver
) -> None:
    """One replica and min.insync.replicas=2: acks=all cannot succeed, as Kafka's
    `kafka-topics.sh --under-min-isr-partitions` reports."""
    topic = unique("fragile")
    create_topic(broker.bootstrap, topic, partitions=2, config={"min.insync.replicas": "2"})
    status, detail = http(console, "GET", f"/api/topics/{topic}")
    assert status == 200 and detail["min_isr"] == 2
    flags = [
        (p["offline"], p["under_min_isr"], p["under_replicated"]) for p in detail["partitions"]
    ]
    assert flags == [(False, True, False)] * 2
    row = next(t for t in http(console, "GET", "/api/topics")[1] if t["name"] == topic)
    assert (row["offline"], row["under_min_isr"], row["under_replicated"]) == (0, 2, 0)
    overview = http(console, "GET", "/api/cluster")[1]
    assert overview["partitions"] == {"offline": 0, "under_min_isr": 2, "under_replicated": 0}
    assert [(b["id"], b["online"]) for b in overview["brokers"]] == [(0, True)]

    open_page(browser, console, f"topics/{topic}")
    row_css = "#partitions tr[data-partition='1']"
    assert browser.find_element(By.CSS_SELECTOR, row_css).get_attribute("class") == "unhealthy"
    assert text(browser, f"{row_css} .health") == "under min ISR"
    open_page(browser, console, "brokers")
    assert text(browser, "#under-min-isr") == "2"
    assert text(browser, "#under-replicated") == "0"


def test_reset_offsets_to_a_datetime_or_by_a_shift_and_delete_over_http(
    broker: BrokerProcess, console: ConsoleProcess
) -> None:
    topic, group = unique("rewind"), unique("rewinder")
    create_topic(broker.bootstrap, topic, partitions=2)
    base = 1_700_000_000_000
    produce(
        broker.bootstrap,
        topic,
        [
            {"value": b"v", "partition": p, "timestamp": base + 1000 * i}
            for p in (0, 1)
            for i in range(10)
        ],
    )
    commit(broker.bootstrap, group, topic, {0: 5})
    path = f"/api/groups/{group}/reset-offsets"

    def reset(**body: object) -> tuple[int, object]:
        return http(console, "POST", path, {"topic": topic, **body})

    assert reset(to="shift", by=-2) == (
        400,
        {"error": f"cannot shift partitions [1] of {topic}: no committed offset"},
    )
    assert reset(to="datetime", time=str(base + 4000))[0] == 200
    assert committed(broker.bootstrap, group) == {0: 4, 1: 4}
    assert reset(to="shift", by=-3)[0] == 200
    assert committed(broker.bootstrap, group) == {0: 1, 1: 1}
    assert reset(to="shift", by="-7")[0] == 200  # kept at the start, as Kafka's tool does
    assert committed(broker.bootstrap, group) == {0: 0, 1: 0}
    after_all = datetime.datetime.fromtimestamp(base / 1000 + 60, datetime.UTC).isoformat()
    assert reset(to="datetime", time=after_all)[0] == 200  # no message at or after: the end
    assert committed(broker.bootstrap, group) == {0: 10, 1: 10}
    assert reset(to="datetime", time="2023-11-14T22:13:25")[0] == 200  # UTC: base + 5 s
    assert committed(broker.bootstrap, group) == {0: 5, 1: 5}
    assert reset(to="shift", by="x") == (400, {"error": "reset to shift needs an integer, got 'x'"})
    assert reset(to="shift") == (400, {"error": "reset to 'shift' needs a value"})
    assert reset(to="sideways")[0] == 400
    assert committed(broker.bootstrap, group) == {0: 5, 1: 5}

    assert http(console, "DELETE", f"/api/groups/{group}") == (200, {"ok": True})
    assert group not in [g["group_id"] for g in http(console, "GET", "/api/groups")[1]]
    status, answer = http(console, "DELETE", f"/api/groups/{group}")
    assert status == 404 and "GROUP_ID_NOT_FOUND" in answer["error"]
