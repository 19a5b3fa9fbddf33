"""docker-compose.yml, the Dockerfile and .dockerignore, checked without Docker (images
cannot be pulled where the tests run): the compose file parses, describes the local
launcher's topology with the launcher's own broker properties (derived from
kafkalite/cluster/launcher.py, so the two cannot drift), every value passes kafkalite's
config parser, and every file the Dockerfile and the services refer to exists."""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafkalite.cluster import zookeeper_server
from kafkalite.cluster.launcher import LocalCluster
from kafkalite.config import build_config, parse_listeners
from kafkalite.testing import BrokerProcess

from .conftest import REPLICATED

REPO = Path(__file__).resolve().parents[2]
BROKERS = ("broker-1", "broker-2", "broker-3")
WORKDIR = "/app"
# Beyond the launcher's own: what a container network needs, and replicated topics.
COMPOSE_ONLY = {"advertised.listeners", "kafkalite.metrics.host", *REPLICATED}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    parsed: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return parsed


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def launcher_properties(broker_id: int, broker_count: int = 3) -> dict[str, str]:
    """What `kafkalite cluster --brokers N` gives broker `broker_id` on its command line."""
    cluster = LocalCluster(Path("data"), broker_count)
    overrides = cluster.broker_overrides(broker_id, "zookeeper:2181")
    return BrokerProcess(Path("data") / f"broker-{broker_id}", overrides).overrides


def overrides(command: list[str]) -> dict[str, str]:
    assert command[:2] == ["kafkalite", "serve"]
    pairs = command[2:]
    assert pairs[::2] == ["--override"] * (len(pairs) // 2) and len(pairs) % 2 == 0
    return dict(value.split("=", 1) for value in pairs[1::2])


def test_services_are_the_launchers_topology(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"zookeeper", *BROKERS, "spark"}
    for service in compose["services"].values():
        assert service["build"] == "." and service["image"] == "kafkalite:local"


def test_brokers_set_the_launchers_properties(compose: dict[str, Any]) -> None:
    zoo_cfg = dict(zookeeper_cfg_lines())
    volumes = {name for name in compose["volumes"]}
    for broker_id, name in enumerate(BROKERS, 1):
        service = compose["services"][name]
        props = overrides(service["command"])
        launcher = launcher_properties(broker_id)
        assert set(props) == set(launcher) | COMPOSE_ONLY
        # The launcher's values, where they are not addresses or paths.
        assert props["broker.id"] == launcher["broker.id"] == str(broker_id)
        assert (
            props["offsets.topic.replication.factor"]
            == (launcher["offsets.topic.replication.factor"])
        )
        assert {key: props[key] for key in REPLICATED} == REPLICATED
        # Addresses that resolve in the compose network.
        assert props["zookeeper.connect"] == f"zookeeper:{zoo_cfg['clientPort']}"
        [listener] = parse_listeners(props["listeners"])
        [advertised] = parse_listeners(props["advertised.listeners"])
        assert (listener.host, advertised.host) == ("0.0.0.0", name)
        assert advertised.port == listener.port
        # The data dir is the broker's own volume.
        assert service["volumes"] == [f"{name}-data:{props['log.dirs']}"]
        assert f"{name}-data" in volumes
        build_config({}, props.items())  # every value parses, as `kafkalite serve` checks


def zookeeper_cfg_lines() -> list[tuple[str, str]]:
    lines = (REPO / "docker" / "zoo.cfg").read_text().splitlines()
    return [
        (key.strip(), value.strip())
        for key, _, value in (line.partition("=") for line in lines)
        if key.strip() and not key.startswith("#")
    ]


def test_zookeeper_is_the_launchers(compose: dict[str, Any]) -> None:
    """Same settings and main class as kafkalite.cluster.zookeeper_server; its files exist."""
    cfg = dict(zookeeper_cfg_lines())
    assert {k: cfg[k] for k in zookeeper_server.DEFAULT_CONFIG} == zookeeper_server.DEFAULT_CONFIG
    service = compose["services"]["zookeeper"]
    command = service["command"]
    assert command[0] == "java" and zookeeper_server.MAIN_CLASS in command
    assert "-Dzookeeper.4lw.commands.whitelist=*" in command  # the ruok healthcheck
    assert command[-1] == f"{WORKDIR}/docker/zoo.cfg"
    assert service["volumes"] == [f"zookeeper-data:{cfg['dataDir']}"]
    classpath = command[command.index("-cp") + 1]
    links = [args for op, args in dockerfile() if op == "RUN" and "zookeeper_lib()" in args]
    assert len(links) == 1 and links[0].endswith(" " + classpath.removesuffix("/*"))


def test_spark_service_reads_every_broker(compose: dict[str, Any]) -> None:
    command = compose["services"]["spark"]["command"]
    assert command[:3] == ["python", "-m", "spark_jobs.page_counts"]
    bootstrap = command[command.index("--bootstrap") + 1].split(",")
    advertised = [
        overrides(compose["services"][name]["command"])["advertised.listeners"] for name in BROKERS
    ]
    assert ["PLAINTEXT://" + address for address in bootstrap] == advertised
    assert set(compose["services"]["spark"]["depends_on"]) == set(BROKERS)


def ignored(path: str) -> bool:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = Path(path).parts
    return any(
        fnmatch.fnmatch(path, pattern.removeprefix("**/"))
        or any(fnmatch.fnmatch(part, pattern.removeprefix("**/")) for part in parts)
        for pattern in patterns
    )


def test_dockerfile_refers_to_files_that_exist(compose: dict[str, Any]) -> None:
    steps = dockerfile()
    assert ("WORKDIR", WORKDIR) in steps
    copied: dict[str, str] = {}  # path in the image -> path in the repo
    for op, args in steps:
        if op == "COPY":
            *sources, target = shlex.split(args)
            for source in sources:
                assert (REPO / source).exists(), source
                assert not ignored(source), f"{source} is in .dockerignore"
                inside = target if not target.endswith("/") else target + source
                copied[str(Path(WORKDIR) / inside)] = source
    # Modules run at build time and by the services come with the image.
    run_modules = re.findall(r"python -m ([\w.]+)", " ".join(a for o, a in steps if o == "RUN"))
    service_modules = [
        s["command"][2]
        for s in compose["services"].values()
        if s["command"][:2] == ["python", "-m"]
    ]
    for module in run_modules + service_modules:
        path = module.replace(".", "/") + ".py"
        assert (REPO / path).exists() and f"{WORKDIR}/{path.split('/')[0]}" in copied, module
    # Files the services name inside the image were copied from the repo.
    for service in compose["services"].values():
        for arg in service["command"]:
            for inside in re.findall(rf"{WORKDIR}/[\w./-]+", arg):
                top = "/".join(inside.split("/")[:3])
                assert top in copied, inside
                assert (REPO / inside.removeprefix(WORKDIR + "/")).is_file(), inside
    [cmd] = [args for op, args in steps if op == "CMD"]
    config = yaml.safe_load(cmd)  # a JSON array
    assert (REPO / config[config.index("--config") + 1]).is_file()


def test_dockerfile_installs_pyprojects_pyspark() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    [wanted] = re.findall(r'"(pyspark[^"]*)"', pyproject)
    installs = [args for op, args in dockerfile() if op == "RUN" and "pip install" in args]
    assert len(installs) == 1 and f'"{wanted}"' in installs[0]
