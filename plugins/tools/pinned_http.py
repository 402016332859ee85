"""One HTTP request to the address the SSRF guard checked (``plugins.tools.netguard``), no other.

The URL's host is resolved and checked, then replaced by the checked IP for the connection; the
``Host`` header and the TLS SNI (which the certificate is verified against) keep the name. So the
library never resolves the name a second time, and a DNS answer that changes between the check and
the connection (rebinding) changes nothing. The client must be made with ``trust_env=False`` (a
proxy from the environment would connect for us, unchecked) and ``follow_redirects=False`` (the
caller checks each hop).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

from plugins.tools.netguard import Allowlist, resolve_checked


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL without user info; ValueError with a reason otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {url[:200]!r}") from exc
    if parts.scheme not in ("http", "https"):
        raise ValueError("only http:// and https:// URLs can be used")
    if not parts.hostname or parts.username is not None or parts.password is not None:
        raise ValueError("the URL needs a host and may not carry a user name or password")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


@functools.cache
def _certifi() -> ssl.SSLContext:
    """The CAs of certifi, loaded once: a context made per client reads the bundle again each time
    (~65 ms of CPU for every CalDAV call or page fetch). It is only read once made, so clients share it."""
    return httpx.create_ssl_context(trust_env=False)


def client(timeout_s: float, *, verify: ssl.SSLContext | bool = True) -> httpx.AsyncClient:
    """``verify``: the system's CAs (certifi) unless a test hands its own."""
    return httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=httpx.Timeout(timeout_s),
                             verify=_certifi() if verify is True else verify)


async def send(http: httpx.AsyncClient, method: str, url: str, allow: Allowlist, *,
               headers: Mapping[str, str] | None = None, content: bytes | None = None,
               stream: bool = False) -> httpx.Response:
    """Raises ValueError (bad URL) or netguard.BlockedAddress (a destination the guard refuses)."""
    scheme, host, port = origin(url)
    ip = await resolve_checked(host, port, allow)
    pinned = httpx.URL(url).copy_with(host=str(ip))
    host_header = host if ":" not in host else f"[{host}]"
    if port != (443 if scheme == "https" else 80):
        host_header += f":{port}"
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    request = http.build_request(method, pinned, headers={**(headers or {}), "Host": host_header}, content=content,
                                 extensions=extensions)
    return await http.send(request, stream=stream)
