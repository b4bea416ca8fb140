"""ddpctl.node.netif: the pure choice on literal tables, then this machine's real interfaces."""

from __future__ import annotations

import socket

import pytest

from ddpctl.node.netif import Interface, choose_ifname, interface_ipv4, list_interfaces, pick_ifname

LO: Interface = ("lo", "127.0.0.1", True)
ETH0: Interface = ("eth0", "10.0.0.5", True)
IB0: Interface = ("ib0", "192.168.1.5", True)
DOWN: Interface = ("eth1", "10.0.1.5", False)
NO_ADDR: Interface = ("ifb0", None, True)

CASES: list[tuple[str | None, list[Interface], str | None]] = [
    ("192.168.1.5", [LO, ETH0, IB0], "ib0"),  # the hostname's own interface wins
    ("127.0.1.1", [LO, ETH0, IB0], "eth0"),  # Debian's /etc/hosts maps the hostname to loopback
    ("127.0.0.1", [LO, NO_ADDR, DOWN, IB0, ETH0], "ib0"),  # first up one with an address, in index order
    (None, [LO, ETH0], "eth0"),  # hostname did not resolve
    ("10.9.9.9", [LO, ETH0], "eth0"),  # resolves to an address no local interface holds
    ("10.0.1.5", [LO, DOWN, ETH0], "eth0"),  # its interface is down
    ("::1", [LO, ETH0], "eth0"),
    ("not-an-ip", [LO, ETH0], "eth0"),
    ("127.0.0.1", [LO], None),
    ("127.0.0.1", [LO, NO_ADDR, DOWN], None),
    (None, [], None),
    ("10.0.0.5", [("lo", "127.0.0.1", True), ("weird", "127.0.0.2", True), ETH0], "eth0"),
]


@pytest.mark.parametrize(("resolved", "interfaces", "expected"), CASES)
def test_choose_ifname(resolved: str | None, interfaces: list[Interface], expected: str | None) -> None:
    assert choose_ifname(resolved, interfaces) == expected


def test_real_interfaces() -> None:
    interfaces = list_interfaces()
    names = [name for _, name in socket.if_nameindex()]
    assert [name for name, _, _ in interfaces] == names
    for name, ip, up in interfaces:
        assert interface_ipv4(name) == ip
        if ip is not None and up:
            # The address really is local: the kernel lets us bind to it.
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.bind((ip, 0))
    if "lo" in names:
        assert ("lo", "127.0.0.1", True) in interfaces


def test_real_pick() -> None:
    interfaces = list_interfaces()
    usable = [(name, ip) for name, ip, up in interfaces if up and ip and not ip.startswith("127.")]
    # "localhost" resolves to loopback: the first usable interface is the answer, whatever this machine has.
    assert pick_ifname("localhost") == (usable[0][0] if usable else None)
    for name, ip in usable:
        if [i for _, i in usable].count(ip) == 1:
            assert pick_ifname(ip) == name


def test_interface_ipv4_unknown() -> None:
    assert interface_ipv4("no-such-if0") is None
    assert interface_ipv4("x" * 40) is None
