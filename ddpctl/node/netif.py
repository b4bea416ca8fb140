"""Which network interface NCCL/Gloo should use when the spec names none (Linux, stdlib only).

Gloo and NCCL advertise the address the node's hostname resolves to; on many clusters (and Debian's default
/etc/hosts) that is 127.0.1.1 or 127.0.0.1, and cross-node rendezvous then fails. So we prefer the interface
that holds the hostname's address only when that address is not loopback, else the first interface that is
up and has a non-loopback IPv4 address.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from collections.abc import Sequence

# <linux/sockios.h> and <net/if.h>
SIOCGIFFLAGS = 0x8913
SIOCGIFADDR = 0x8915
IFF_UP = 0x1
_IFNAMSIZ = 16
_IFREQ_SIZE = 40  # struct ifreq: 16-byte name + 24-byte union

Interface = tuple[str, str | None, bool]  # (name, IPv4 address or None, up)


def _is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def choose_ifname(resolved_ip: str | None, interfaces: Sequence[Interface]) -> str | None:
    """Pure core of pick_ifname: `interfaces` in index order, as list_interfaces() returns them."""
    if resolved_ip is not None and not _is_loopback(resolved_ip):
        for name, ip, up in interfaces:
            if ip == resolved_ip and up:
                return name
    for name, ip, up in interfaces:
        if up and ip is not None and not _is_loopback(ip):
            return name
    return None


def _ifreq(sock: socket.socket, request: int, ifname: str) -> bytes | None:
    name = ifname.encode()
    if len(name) >= _IFNAMSIZ:
        return None
    try:
        return fcntl.ioctl(sock.fileno(), request, name.ljust(_IFREQ_SIZE, b"\0"))
    except OSError:  # no IPv4 address (EADDRNOTAVAIL), interface gone (ENODEV)
        return None


def _ipv4(sock: socket.socket, ifname: str) -> str | None:
    answer = _ifreq(sock, SIOCGIFADDR, ifname)
    # sockaddr_in inside the union: family (2 bytes), port (2), address (4).
    return None if answer is None else socket.inet_ntoa(answer[20:24])


def _is_up(sock: socket.socket, ifname: str) -> bool:
    answer = _ifreq(sock, SIOCGIFFLAGS, ifname)
    return answer is not None and bool(struct.unpack_from("H", answer, _IFNAMSIZ)[0] & IFF_UP)


def list_interfaces() -> list[Interface]:
    """(name, IPv4 address or None, up) for every interface of this machine, in index order."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return [(name, _ipv4(sock, name), _is_up(sock, name)) for _, name in socket.if_nameindex()]


def interface_ipv4(ifname: str) -> str | None:
    """The IPv4 address of one interface, or None when it has none or does not exist."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return _ipv4(sock, ifname)


def pick_ifname(hostname: str) -> str | None:
    """Interface for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME on this node, or None if there is none."""
    try:
        resolved: str | None = socket.gethostbyname(hostname)
    except OSError:
        resolved = None
    return choose_ifname(resolved, list_interfaces())
