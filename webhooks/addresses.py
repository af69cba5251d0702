"""Where a webhook may point: http(s) only, and never at this network unless an admin allows it.

A webhook URL is chosen by whoever can edit a queue, and the sweep calls it from inside the
network: without these checks it could reach the cloud's metadata service, a database's admin
port, or anything on loopback. The URL is checked when it is saved, and every address its name
resolves to is checked again just before the connection, so a DNS record changed later cannot
lead the call inside either. Plain Python: Django settings reach it as `allow_private`.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import NamedTuple
from urllib.parse import urlsplit

SCHEMES = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class RefusedAddress(OSError):
    """The webhook's address is not one taskhoster calls."""


class Target(NamedTuple):
    scheme: str
    host: str
    port: int
    path: str  # with the query, as the request line carries it


def split_url(url: str) -> Target:
    """Where the URL points, or RefusedAddress when it is not an http(s) URL naming a host."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:
        raise RefusedAddress(f"Not a URL: {exc}.") from None
    if parts.scheme not in SCHEMES:
        scheme = parts.scheme or "(none)"
        raise RefusedAddress(f"Only http and https URLs are called, not {scheme}.")
    if not parts.hostname:
        raise RefusedAddress("The URL names no host.")
    if parts.username is not None or parts.password is not None:
        raise RefusedAddress(
            "Put no user name or password in the URL; the signature says who calls."
        )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, parts.port or SCHEMES[parts.scheme], path)


# IPv6 forms that carry an IPv4 address, and reach it: the translators and tunnels of the
# network, or the host's own stack, deliver them to the IPv4 address inside. The ipaddress
# module counts most of them global (3.11), so 64:ff9b::7f00:1 would pass for a public address
# while a NAT64 gateway hands it to 127.0.0.1.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: a network's own translator
_SIXTOFOUR = ipaddress.ip_network("2002::/16")  # RFC 3056
_COMPATIBLE = ipaddress.ip_network("::/96")  # RFC 4291's deprecated IPv4-compatible form
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")  # RFC 4291
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 (SIIT)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address stands for, and the form's name; None for none.

    A local-use NAT64 address (64:ff9b:1::/48) is read in the /96 form its translators use
    most (the IPv4 address in the last 32 bits, the 48 bits before it zero); in another form
    of that prefix the address inside is not known (None: refused_reason refuses the prefix
    as a private network's)."""
    low = ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    if ip in _MAPPED:
        return low, "IPv4-mapped"
    if ip in _TRANSLATED:
        return low, "IPv4-translated"
    if ip in _NAT64:
        return low, "NAT64"
    if ip in _LOCAL_NAT64:
        middle = (int(ip) >> 32) & 0xFFFF_FFFF_FFFF
        return (low, "local-use NAT64") if middle == 0 else None
    if ip in _SIXTOFOUR and ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    if ip in _COMPATIBLE and int(ip) > 1:  # :: and ::1 are IPv6's own
        return low, "IPv4-compatible"
    return None


def refused_reason(address: str, *, allow_private: bool) -> str | None:
    """Why an IP address may not be called, or None when it may. An IPv6 address that carries
    an IPv4 address (NAT64, 6to4, IPv4-compatible, -mapped or -translated) is refused when the
    IPv4 address inside would be, naming both."""
    written = address.split("%", 1)[0]  # drop an IPv6 zone
    ip: IPAddress = ipaddress.ip_address(written)
    if isinstance(ip, ipaddress.IPv6Address):
        inside = embedded_ipv4(ip)
        if inside is not None:
            reason = refused_reason(str(inside[0]), allow_private=allow_private)
            return f"{reason} ({written} is its {inside[1]} form)" if reason else None
        if ip in _LOCAL_NAT64 and not allow_private:
            return f"{ip} is a local-use NAT64 address (64:ff9b:1::/48) of this network"
    if ip.is_multicast or ip.is_unspecified:
        return f"{ip} is not a host's address"
    if ip.is_global or allow_private:
        return None
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    return f"{ip} is a private or reserved address"


def check_host(host: str, port: int, *, allow_private: bool, must_resolve: bool) -> list[tuple]:
    """The host's addresses (socket.getaddrinfo's answers), each of them allowed.

    Raises RefusedAddress when any address is refused, since the resolver's order decides which
    one a connection uses. A name that does not resolve is refused when `must_resolve` (just
    before a call); when saving, it is let through (the network that will resolve it may not be
    this one yet) and the answer is []: the check before each call still applies."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if not must_resolve:
            return []
        raise RefusedAddress(f"{host} does not resolve: {exc.strerror}.") from None
    for *_, sockaddr in found:
        reason = refused_reason(sockaddr[0], allow_private=allow_private)
        if reason:
            raise RefusedAddress(
                f"{host} is refused: {reason}. Webhooks call only public addresses unless "
                "TASKHOSTER_WEBHOOK_ALLOW_PRIVATE is set."
            )
    return found


def check_url(url: str, *, allow_private: bool, must_resolve: bool) -> None:
    """Raise RefusedAddress unless the URL is one a webhook may have."""
    target = split_url(url)
    check_host(target.host, target.port, allow_private=allow_private, must_resolve=must_resolve)
