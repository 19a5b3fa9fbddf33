"""A small TCP proxy in front of one listener, with faults the harness switches on and off.

Threads, not an event loop: a fault in the harness's own loop must not stall the traffic.
One accept thread, two pump threads per connection. Faults (`ProxyFaults`):

- `down`: existing connections are closed and new ones closed on accept (a dropped link);
- `latency_s`: each chunk waits before it is forwarded (both directions);
- `blackhole`: "upstream" (client->server) or "downstream" (server->client) stops being
  forwarded; bytes stay in the kernel's buffers, as when packets are lost and TCP retransmits,
  so the stream is intact when the fault heals;
- `refuse_pids`: connections whose peer process is one of these pids are treated as `down`
  (a broker partitioned from the others, but not from clients). The peer process is found
  from /proc (socket inode of the peer's port -> the process holding it), as all traffic is
  on 127.0.0.1 and ports alone do not say who connected.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from dataclasses import dataclass, field

_CHUNK = 65536


@dataclass
class ProxyFaults:
    down: bool = False
    latency_s: float = 0.0
    blackhole: str | None = None  # "upstream" | "downstream"
    refuse_pids: frozenset[int] = frozenset()

    def heal(self) -> None:
        self.down, self.latency_s, self.blackhole, self.refuse_pids = False, 0.0, None, frozenset()


@dataclass(eq=False)  # kept in a set, by identity
class _Link:
    client: socket.socket
    server: socket.socket
    peer_port: int
    peer_pid: int | None  # found when a fault needs it (a /proc scan per link)
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class TcpProxy:
    """Listens on 127.0.0.1:`port` (0: a free one) and forwards to `target_port`."""

    def __init__(self, name: str, target_port: int, port: int = 0, host: str = "127.0.0.1"):
        self.name = name
        self.host = host
        self.target_port = target_port
        self.faults = ProxyFaults()
        self._listener = socket.create_server((host, port), backlog=128)
        self.port = self._listener.getsockname()[1]
        self._links: set[_Link] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name=f"proxy-{name}", daemon=True)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (Linux)
        with contextlib.suppress(OSError):
            self._listener.close()
        self.drop_links()
        self._thread.join(5)

    # Faults -------------------------------------------------------------------------------

    def set_down(self, down: bool) -> None:
        self.faults.down = down
        if down:
            self.drop_links()

    def refuse(self, pids: frozenset[int]) -> None:
        self.faults.refuse_pids = pids
        with self._lock:
            links = list(self._links)
        for link in links:
            if link.peer_pid is None:
                link.peer_pid = peer_process(link.peer_port)
        doomed = [link for link in links if link.peer_pid in pids]
        for link in doomed:
            link.close()

    def heal(self) -> None:
        self.faults.heal()

    def drop_links(self) -> None:
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()

    # Traffic ------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, address = self._listener.accept()
            except OSError:
                return
            peer_pid = peer_process(address[1]) if self.faults.refuse_pids else None
            if self.faults.down or (peer_pid in self.faults.refuse_pids):
                client.close()
                continue
            try:
                server = socket.create_connection((self.host, self.target_port), timeout=5)
            except OSError:
                client.close()  # the broker is down: the client sees a closed connection
                continue
            server.settimeout(None)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, server, address[1], peer_pid)
            with self._lock:
                self._links.add(link)
            for source, sink, direction in (
                (client, server, "upstream"),
                (server, client, "downstream"),
            ):
                threading.Thread(
                    target=self._pump, args=(link, source, sink, direction), daemon=True
                ).start()

    def _pump(self, link: _Link, source: socket.socket, sink: socket.socket, direction: str):
        try:
            while not link.closed.is_set():
                while self.faults.blackhole == direction and not link.closed.is_set():
                    link.closed.wait(0.05)  # leave the bytes in the kernel buffers
                data = source.recv(_CHUNK)
                if not data:
                    break
                if self.faults.latency_s:
                    time.sleep(self.faults.latency_s)
                while self.faults.blackhole == direction and not link.closed.is_set():
                    link.closed.wait(0.05)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            link.close()
            with self._lock:
                self._links.discard(link)


def peer_process(port: int) -> int | None:
    """The pid of the local process owning the TCP socket bound to 127.0.0.1:`port`."""
    inode = _socket_inode(port)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                with contextlib.suppress(OSError):
                    if os.readlink(f"{fd_dir}/{fd}") == target:
                        return int(pid)
        except OSError:
            continue
    return None


def _socket_inode(port: int) -> str | None:
    wanted = f"0100007F:{port:04X}"
    with contextlib.suppress(OSError), open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if fields[1] == wanted:
                return fields[9]
    return None
