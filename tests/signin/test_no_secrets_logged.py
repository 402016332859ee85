"""No sign-in secret reaches the log: not a link's token (minted by /web, the operator route, the CLI),
not a session cookie, not a CSRF token, whether the link works, is reused, previewed or refused."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from gateway.testing import message, test_config
from tests.security.guarded_daemon import operator_auth
from tests.signin.rig import browser, daemon, open_link, person, session_cookie, sign_in, url

TOKEN_IN_URL = re.compile(r"signin\?t=([A-Za-z0-9_%-]+)")


async def test_no_token_cookie_or_csrf_token_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secrets: list[str] = []
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        reply = await gw.handle_inbound(message("/web", account="tg-1", channel="telegram"))
        assert reply is not None
        found = TOKEN_IN_URL.search(reply.text)
        assert found is not None
        secrets.append(found.group(1))
        async with browser() as cli, cli.post(url(gw, "/api/session/links"), json={"user": alice},
                                              headers=operator_auth(gw)) as resp:
            link = (await resp.json())["url"]
        secrets.append(TOKEN_IN_URL.search(link).group(1))  # type: ignore[union-attr]
        async with browser() as http:
            async with http.get(link) as resp:  # a link preview first
                assert resp.status == 200
            assert (await open_link(http, link)).status == 303
            assert (await open_link(http, link)).status == 410  # reused
            secrets.append(session_cookie(http) or "")
            async with http.post(url(gw, f"/t/users/{alice}/notes"), json={"text": "x"},
                                 headers={"X-CSRF-Token": "wrong-csrf-token-value"}) as resp:
                assert resp.status == 403
            async with http.post(url(gw, "/api/session/logout"), json={}) as resp:
                assert resp.status == 403
        async with browser() as other:
            csrf = await sign_in(gw, other, alice)
            secrets += [csrf, session_cookie(other) or ""]
            async with other.post(url(gw, "/api/session/logout"), json={}, headers={"X-CSRF-Token": csrf}) as resp:
                assert resp.status == 200
        async with browser() as local, local.post(url(gw, "/api/session/local"), json={"client_id": "web-1"}) as r:
            secrets += [(await r.json())["csrf"], session_cookie(local) or ""]
    assert all(len(s) >= 20 for s in secrets), secrets
    logged = caplog.text
    assert "sign-in link" in logged and "signed in" in logged  # the events are logged ...
    for secret in secrets:
        assert secret not in logged  # ... their secrets are not
