"""``rediss://``: the bus speaks TLS and verifies the server certificate.

No bundled server is built with TLS, so a small TLS-terminating proxy in front of the embedded
server stands in for a managed Redis; the certificate comes from the openssl command line."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from gateway.bus import JobBus, ServerError
from gateway.bus.server import socket_path

from .conftest import bus_config

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


def _make_cert(cert: Path, key: Path) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )


async def test_rediss_url_with_a_verified_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    _make_cert(cert, key)
    owner = JobBus(bus_config(tmp_path / "owner"))  # the embedded server the proxy fronts
    await owner.start()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    upstream = socket_path(owner.config.data_dir)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(str(upstream))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    proxy = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    port = proxy.sockets[0].getsockname()[1]
    try:
        url = f"rediss://localhost:{port}/0?ssl_ca_certs={cert}&ssl_cert_reqs=required"
        async with JobBus(bus_config(tmp_path, url=url)) as bus:
            await bus.enqueue("over_tls", {}, job_id="t1")
        assert await owner.redis.hget(owner.keys.job("t1"), "state") == "queued"
        # Without the CA the certificate is refused: TLS is really verified.
        with pytest.raises(ServerError):
            await JobBus(bus_config(tmp_path, url=f"rediss://localhost:{port}/0")).start()
    finally:
        proxy.close()
        await owner.close()
