"""Where a network tool may connect: public addresses only, unless the operator allowed the host.

The check runs on the addresses a name *resolves to*, not on the name or URL as written, so every
spelling of loopback is caught the same way (``127.1``, ``2130706433``, ``0x7f.1``, ``[::ffff:127.0.0.1]``,
a DNS name pointing at 127.0.0.1): the resolver turns them all into one address. The caller then
connects to exactly the address that was checked (``plugins.tools.web_fetch``), so a second lookup
that answers differently (DNS rebinding) never happens.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Not always "not global" in the standard library's tables, and never a public web server.
_EXTRA_BLOCKED: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("100.64.0.0/10"),  # carrier-grade NAT (RFC 6598)
    ipaddress.ip_network("192.0.0.0/24"),  # IETF protocol assignments
    ipaddress.ip_network("198.18.0.0/15"),  # benchmarking
    ipaddress.ip_network("64:ff9b:1::/48"),  # local-use NAT64
    ipaddress.ip_network("fec0::/10"),  # deprecated site-local
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class BlockedAddress(Exception):
    """The destination is not allowed (the message says why, without secrets)."""


def embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, Teredo, NAT64), if any."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(ip: IPAddress) -> bool:
    """True only for a global unicast address, also after unwrapping an embedded IPv4 address."""
    inner = embedded_v4(ip)
    if inner is not None and not is_public(inner):
        return False
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved or not ip.is_global:
        return False
    return not any(ip.version == n.version and ip in n for n in _EXTRA_BLOCKED)


@dataclass(frozen=True, slots=True)
class Allowlist:
    """The operator's intranet: host names (``.lan`` covers every subdomain) and IP networks."""

    hosts: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, items: list[str]) -> Allowlist:
        hosts, suffixes, networks = set(), [], []
        for item in items:
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
                continue
            except ValueError:
                pass
            if item.startswith("."):
                suffixes.append(item)
            else:
                hosts.add(item)
        return cls(frozenset(hosts), tuple(suffixes), tuple(networks))

    def allows_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.hosts or any(host.endswith(s) for s in self.suffixes)

    def allows_ip(self, ip: IPAddress) -> bool:
        return any(ip.version == n.version and ip in n for n in self.networks)


async def resolve_checked(host: str, port: int, allow: Allowlist) -> IPAddress:
    """The one address to connect to for ``host``: every address it resolves to must be public (or
    allowed), since a name answering with both a public and a private address is an attack, not a
    mirror. Raises BlockedAddress."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise BlockedAddress(f"cannot resolve {host!r}") from exc
    addresses: list[IPAddress] = []
    for info in infos:
        raw = str(info[4][0]).split("%", 1)[0]  # an IPv6 zone id is not part of the address
        ip = ipaddress.ip_address(raw)
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise BlockedAddress(f"cannot resolve {host!r}")
    host_allowed = allow.allows_host(host)
    for ip in addresses:
        if not (is_public(ip) or host_allowed or allow.allows_ip(ip)):
            raise BlockedAddress(f"{host} resolves to a private or reserved address ({ip}); "
                                 "the operator can allow intranet hosts in tools.web_fetch.allow_hosts")
    # IPv4 first: a host's IPv6 address is more often unreachable from a home server than its IPv4 one.
    return next((ip for ip in addresses if ip.version == 4), addresses[0])
