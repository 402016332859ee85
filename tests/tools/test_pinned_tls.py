"""An https request pinned to the checked IP still verifies the certificate against the host *name*
(the TLS SNI), so pinning never weakens TLS: a certificate for another name is refused."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from plugins.tools import pinned_http
from plugins.tools.netguard import Allowlist


def make_cert(tmp: Path, name: str) -> tuple[Path, Path]:
    cert, key = tmp / f"{name}.pem", tmp / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


async def serve_tls(cert: Path, key: Path) -> tuple[web.AppRunner, int]:
    async def host(req: web.Request) -> web.Response:
        return web.Response(text=f"host={req.host}")

    app = web.Application()
    app.router.add_get("/host", host)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest.fixture
async def tls_servers(tmp_path: Path) -> AsyncIterator[tuple[int, int, ssl.SSLContext]]:
    """A server with a certificate for localhost, one with a certificate for other.example, and a
    client context trusting both (self-signed)."""
    good, wrong = make_cert(tmp_path, "localhost"), make_cert(tmp_path, "other.example")
    trust = ssl.create_default_context(cafile=str(good[0]))
    trust.load_verify_locations(cafile=str(wrong[0]))
    (r1, p1), (r2, p2) = await serve_tls(*good), await serve_tls(*wrong)
    yield p1, p2, trust
    await r1.cleanup()
    await r2.cleanup()


async def test_pinned_https_verifies_the_name(tls_servers: tuple[int, int, ssl.SSLContext]) -> None:
    good, wrong, trust = tls_servers
    allow = Allowlist.parse(["localhost"])
    async with pinned_http.client(5, verify=trust) as http:
        response = await pinned_http.send(http, "GET", f"https://localhost:{good}/host", allow)
        assert response.status_code == 200 and response.text == f"host=localhost:{good}"
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await pinned_http.send(http, "GET", f"https://localhost:{wrong}/host", allow)
