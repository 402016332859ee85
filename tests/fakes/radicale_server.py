"""A real CalDAV server: Radicale's WSGI app in a thread, on a free loopback port, its collections and
its htpasswd file in a folder of the test's own; one user with a calendar "Personal" made for them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

MKCALENDAR = ('<?xml version="1.0"?><c:mkcalendar xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">'
              '<d:set><d:prop><d:displayname>Personal</d:displayname></d:prop></d:set></c:mkcalendar>')


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def radicale_server(folder: Path, user: str, password: str) -> Iterator[str]:
    """Radicale with ``user`` (htpasswd, plain) and their calendar "Personal"; yields the user's URL."""
    import httpx
    import radicale as radicale_app
    import radicale.config

    (folder / "users").write_text(f"{user}:{password}\n")
    cfg = radicale.config.load([])
    cfg.update({"storage": {"filesystem_folder": str(folder / "collections")},
                "auth": {"type": "htpasswd", "htpasswd_filename": str(folder / "users"),
                         "htpasswd_encryption": "plain", "delay": "0"}}, "test", privileged=True)
    server: WSGIServer = make_server("127.0.0.1", 0, radicale_app.Application(cfg), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/{user}/"
    try:
        with httpx.Client(auth=(user, password), timeout=10) as http:
            assert http.request("PROPFIND", url, headers={"Depth": "0"}).status_code == 207  # makes the home
            made = http.request("MKCALENDAR", url + "personal/", content=MKCALENDAR.encode(),
                                headers={"Content-Type": "application/xml"})
            assert made.status_code == 201, made.text
        yield url
    finally:
        server.shutdown()
        thread.join(5)
        server.server_close()
