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


def refused_reason(address: str, *, allow_private: bool) -> str | None:
    """Why an IP address may not be called, or None when it may."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:10.0.0.1 is 10.0.0.1
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
