"""Impaired links on this machine for the network-fault suite: a network namespace joined
to the host by a veth pair (``Link``), whose traffic nftables rules drop at random, drop
entirely or reset, and ``tc tbf`` slows; and relays (``Relays``): small TCP proxies that
can add delay or hang (read nothing, forward nothing, while the kernel keeps the
connection open). This kernel has no netem: everything here is nftables, tbf and the
relays.

Everything global is named with ``fsnet`` (namespace, veth, nft table) and removed when
its context ends, failure or not; leftovers of a run that was killed are removed first."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

TAG = "fsnet"


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=check, timeout=30)


def capability_problem() -> str | None:
    """Why impaired links cannot be built here (not root, a tool missing), or None."""
    if os.geteuid() != 0:
        return "network namespaces, nftables and tc need root"
    missing = [tool for tool in ("ip", "nft", "tc") if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian packages iproute2 and nftables)"
    return None


def require_capability() -> None:
    """Skip when not root, with the reason; in CI (``CI`` or ``FORMSYNC_CI`` set), and
    for any other missing capability, fail instead."""
    problem = capability_problem()
    if problem is None:
        return
    in_ci = bool(os.environ.get("CI") or os.environ.get("FORMSYNC_CI"))
    if os.geteuid() != 0 and not in_ci:
        pytest.skip(f"network faults: {problem}")
    pytest.fail(f"network faults cannot run: {problem}")


def _remove_leftovers() -> None:
    """Namespaces, links and tables of earlier runs whose process is gone."""
    alive = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    for line in _run("ip", "netns", "list", check=False).stdout.splitlines():
        m = re.match(rf"({TAG}-(\d+))\b", line)
        if m and int(m.group(2)) not in alive:
            _run("ip", "netns", "del", m.group(1), check=False)
    for m in re.finditer(rf"\d+: ({TAG}h(\d+))[@:]", _run("ip", "-o", "link", check=False).stdout):
        if int(m.group(2)) not in alive:
            _run("ip", "link", "del", m.group(1), check=False)
    for m in re.finditer(rf"table inet ({TAG}_(\d+))", _run("nft", "list", "tables", check=False).stdout):
        if int(m.group(2)) not in alive:
            _run("nft", "delete", "table", "inet", m.group(1), check=False)


def _free_subnet() -> int:
    """A third octet of 10.23.X.0/30 no address of the host is in."""
    used = _run("ip", "-o", "addr", check=False).stdout
    choices = [x for x in range(256) if f"10.23.{x}." not in used]
    return random.choice(choices)


@dataclass
class Link:
    """A namespace ``ns`` at ``ns_ip``, joined to the host at ``host_ip`` by the veth
    ``host_if`` (host side). Faults apply to TCP traffic on the veth to or from a port:
    either end's, so one port names one flow."""

    ns: str
    host_if: str
    host_ip: str
    ns_ip: str
    table: str

    def wrap(self, args: Sequence[str]) -> list[str]:
        """``args`` run inside the namespace."""
        return ["ip", "netns", "exec", self.ns, *args]

    def _rules(self, port: int, verdict: str, *, chains: Sequence[str] = ("input", "output")) -> None:
        where = {"input": "iifname", "output": "oifname"}
        lines = [f"add rule inet {self.table} {chain} {where[chain]} {self.host_if} tcp {end} {port} {verdict}"
                 for chain in chains for end in ("sport", "dport")]
        subprocess.run(["nft", "-f", "-"], input="\n".join(lines) + "\n", text=True, check=True, timeout=30)

    def partition(self, port: int) -> None:
        """Every packet of the flow dropped, both ways: connections stay open, nothing arrives."""
        self._rules(port, "drop")

    def loss(self, port: int, percent: int) -> None:
        """``percent`` % of the flow's packets dropped at random, each way."""
        self._rules(port, f"numgen random mod 100 < {percent} drop")

    def resets(self, port: int, percent: int = 100) -> None:
        """``percent`` % of the packets the host sends in the flow refused with a TCP
        reset to their sender on the host (100: no connection of the flow can be made)."""
        match = "" if percent >= 100 else f"numgen random mod 100 < {percent} "
        self._rules(port, f"{match}reject with tcp reset", chains=("output",))

    def shape(self, kbit: int) -> None:
        """Both directions of the veth limited to ``kbit`` kbit/s (tbf)."""
        for prefix in ((), ("-n", self.ns)):
            dev = self.host_if if not prefix else "veth0"
            _run("tc", *prefix, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{kbit}kbit",
                 "burst", "4kb", "latency", "2s")

    def clear(self) -> None:
        """No fault left: rules flushed, rate limits removed."""
        _run("nft", "flush", "chain", "inet", self.table, "input")
        _run("nft", "flush", "chain", "inet", self.table, "output")
        _run("tc", "qdisc", "del", "dev", self.host_if, "root", check=False)
        _run("tc", "-n", self.ns, "qdisc", "del", "dev", "veth0", "root", check=False)


@contextlib.contextmanager
def link() -> Iterator[Link]:
    """A fresh namespace joined to the host; all of it removed at the end."""
    _remove_leftovers()
    pid = os.getpid()
    octet = _free_subnet()
    lk = Link(f"{TAG}-{pid}", f"{TAG}h{pid}", f"10.23.{octet}.1", f"10.23.{octet}.2", f"{TAG}_{pid}")
    try:
        _run("ip", "netns", "add", lk.ns)
        _run("ip", "link", "add", lk.host_if, "type", "veth", "peer", "name", "veth0", "netns", lk.ns)
        _run("ip", "addr", "add", f"{lk.host_ip}/30", "dev", lk.host_if)
        _run("ip", "link", "set", lk.host_if, "up")
        _run("ip", "-n", lk.ns, "addr", "add", f"{lk.ns_ip}/30", "dev", "veth0")
        _run("ip", "-n", lk.ns, "link", "set", "veth0", "up")
        _run("ip", "-n", lk.ns, "link", "set", "lo", "up")
        subprocess.run(["nft", "-f", "-"], text=True, check=True, timeout=30, input=(
            f"add table inet {lk.table}\n"
            f"add chain inet {lk.table} input {{ type filter hook input priority 0; }}\n"
            f"add chain inet {lk.table} output {{ type filter hook output priority 0; }}\n"))
        yield lk
    finally:
        _run("nft", "delete", "table", "inet", lk.table, check=False)
        _run("ip", "link", "del", lk.host_if, check=False)
        _run("ip", "netns", "del", lk.ns, check=False)


# -- relays ------------------------------------------------------------------------------------


@dataclass
class Relay:
    """A TCP proxy from ``port`` on its listening address to ``target``. ``delay_s``
    holds each chunk that long before forwarding it; ``hang()`` stops forwarding (and
    reading) in both directions until ``resume()``: the peer looks alive to the kernel,
    dead to the application."""

    target: tuple[str, int]
    port: int = 0
    delay_s: float = 0.0
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    server: asyncio.AbstractServer | None = None

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await self.flowing.wait()
                data = await reader.read(65536)
                if not data:
                    break
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), 10)
        except (TimeoutError, OSError):
            writer.transport.abort()
            return
        with contextlib.suppress(asyncio.CancelledError):  # the relays closing
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))


class Relays:
    """Relays on one event loop in a thread of their own (the test's own loop may block
    in a database call without stalling them)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name=f"{TAG}-relays")
        self.thread.start()
        self.relays: list[Relay] = []

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def add(self, listen: str, target: tuple[str, int]) -> Relay:
        """A relay listening on ``listen`` (a free port) to ``target``."""
        async def start() -> Relay:
            relay = Relay(target)
            relay.flowing.set()
            relay.server = await asyncio.start_server(relay.serve, listen, 0)
            relay.port = relay.server.sockets[0].getsockname()[1]
            return relay

        relay: Relay = self._call(start())
        self.relays.append(relay)
        return relay

    def hang(self, relay: Relay) -> None:
        self.loop.call_soon_threadsafe(relay.flowing.clear)

    def resume(self, relay: Relay) -> None:
        self.loop.call_soon_threadsafe(relay.flowing.set)

    def set_delay(self, relay: Relay, seconds: float) -> None:
        self.loop.call_soon_threadsafe(setattr, relay, "delay_s", seconds)

    def close(self) -> None:
        async def stop() -> None:
            for relay in self.relays:
                relay.flowing.set()
                if relay.server is not None:
                    relay.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self._call(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)
            self.loop.close()


@contextlib.contextmanager
def relays() -> Iterator[Relays]:
    hub = Relays()
    try:
        yield hub
    finally:
        hub.close()


def rss_bytes(pid: int) -> int:
    """The resident memory of process ``pid`` and of its children (the store process)."""
    total = 0
    for p in [pid, *_children(pid)]:
        with contextlib.suppress(OSError), open(f"/proc/{p}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    return out
