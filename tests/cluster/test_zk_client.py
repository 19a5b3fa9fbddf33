"""kafkalite.cluster.zk_client against a real ZooKeeper: requests, conditional writes,
transactions, ephemeral nodes, watches as trio events, session state changes."""

from __future__ import annotations

import pytest
import trio

from kafkalite.cluster.zk_client import (
    BadVersion,
    CheckOp,
    ConnectionLost,
    CreateOp,
    DeleteOp,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionState,
    SetDataOp,
    WatchEvent,
    ZkClient,
)
from kafkalite.cluster.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.slow
WAIT = 30  # seconds: the bound of every wait on a watch or state change


def test_create_get_set_delete_and_children(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk:
            assert await zk.create("/a/b", b"one", make_parents=True) == "/a/b"
            data, stat = await zk.get("/a/b")
            assert (data, stat.version, stat.ephemeral_owner) == (b"one", 0, 0)
            assert (await zk.set("/a/b", b"two", version=0)).version == 1
            with pytest.raises(BadVersion) as stale:
                await zk.set("/a/b", b"stale", version=0)
            assert stale.value.path == "/a/b"
            assert (await zk.get("/a/b"))[0] == b"two"
            with pytest.raises(NodeExists):
                await zk.create("/a/b")
            await zk.create("/a/c")
            assert await zk.children("/a") == ["b", "c"]
            with pytest.raises(NotEmpty):
                await zk.delete("/a")
            with pytest.raises(BadVersion):
                await zk.delete("/a/b", version=0)
            await zk.delete("/a/b", version=1)
            assert await zk.exists("/a/b") is None
            with pytest.raises(NoNode):
                await zk.get("/a/b")
            first = await zk.create("/a/seq-", sequence=True)
            second = await zk.create("/a/seq-", sequence=True)
            assert (first, second) == ("/a/seq-0000000002", "/a/seq-0000000003")
            await zk.ensure_path("/a/c")  # exists: no error

    trio.run(main)


def test_multi_applies_all_or_nothing(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk:
            await zk.create("/epoch", b"1")
            results = await zk.multi(
                [CheckOp("/epoch", 0), CreateOp("/x", b"x"), SetDataOp("/epoch", b"2", 0)]
            )
            assert results[0] is True and results[1] == "/x"
            assert results[2].version == 1
            with pytest.raises(BadVersion) as failed:
                await zk.multi([CreateOp("/y"), CheckOp("/epoch", 0), DeleteOp("/x")])
            assert (failed.value.op_index, failed.value.path) == (1, "/epoch")
            assert await zk.exists("/y") is None  # rolled back
            assert await zk.exists("/x") is not None

    trio.run(main)


def test_ephemeral_node_goes_with_its_session_and_watches_fire(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as watcher:
            stat, created = await watcher.exists_watch("/live")
            assert stat is None
            names, child = await watcher.children_watch("/")
            async with ZkClient.open(zk_connect) as owner:
                await owner.create("/live", b"v", ephemeral=True)
                with trio.fail_after(WAIT):
                    assert await created.wait() == WatchEvent("created", "/live")
                    assert await child.wait() == WatchEvent("child", "/")
                data, stat, changed = await watcher.get_watch("/live")
                assert stat.ephemeral_owner == owner.session_id != watcher.session_id
                await owner.set("/live", b"w")
                with trio.fail_after(WAIT):
                    assert await changed.wait() == WatchEvent("changed", "/live")
                _, _, deleted = await watcher.get_watch("/live")
                assert not deleted.fired
            # The owner's session closed: ZooKeeper removed the node at once.
            with trio.fail_after(WAIT):
                assert await deleted.wait() == WatchEvent("deleted", "/live")
            assert await watcher.exists("/live") is None
            assert names == []

    trio.run(main)


def test_restarted_zookeeper_keeps_the_session_and_drops_watches(
    zookeeper_factory,
) -> None:
    server: ZooKeeperServer = zookeeper_factory()

    async def main() -> None:
        async with ZkClient.open(server.connect_string, session_timeout_ms=10_000) as zk:
            changes = zk.state_changes()
            session = zk.session_id
            await zk.create("/eph", ephemeral=True)
            _, watch = await zk.exists_watch("/other")
            await trio.to_thread.run_sync(server.kill)
            with trio.fail_after(WAIT):
                assert await changes.receive() is SessionState.SUSPENDED
                with pytest.raises(ConnectionLost):
                    await watch.wait()  # kazoo drops watches with the connection
            await trio.to_thread.run_sync(server.start)
            with trio.fail_after(WAIT):
                assert await changes.receive() is SessionState.CONNECTED
            assert zk.session_id == session
            assert (await zk.exists("/eph")).ephemeral_owner == session

    trio.run(main)


def test_expired_session_is_reported_lost_and_a_new_one_opens(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect, session_timeout_ms=4000) as zk:
            changes = zk.state_changes()
            old_session = zk.session_id
            await zk.create("/eph", ephemeral=True)
            await zk.expire_session()
            seen = []
            with trio.fail_after(WAIT):
                while SessionState.LOST not in seen:  # SUSPENDED first: the connection drops
                    seen.append(await changes.receive())
                assert await changes.receive() is SessionState.CONNECTED
            assert seen[0] is SessionState.SUSPENDED
            assert zk.state is SessionState.CONNECTED
            assert zk.session_id not in (None, old_session)
            assert await zk.exists("/eph") is None

    trio.run(main)


def test_unreachable_zookeeper_fails_within_connection_timeout() -> None:
    async def main() -> None:
        with pytest.raises(ConnectionLost, match="within 1000 ms"):
            async with ZkClient.open("127.0.0.1:1", connection_timeout_ms=1000):
                pass

    trio.run(main)
