"""Issue 27, low item: docs/security.md should say plainly that on loopback without ``server.token``
every local OS account is the operator, through ``POST /api/session/local`` and not only ``/ws``.

The behaviour (any local process, with no cookie and no token file, gets an operator session that reads
another person's sessions) is what the docs must state; the second test holds the docs to it."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.testing import message, test_config
from tests.signin.rig import browser, daemon, person, url

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


async def test_any_local_process_is_the_operator_without_a_token(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw, browser() as local_process:
        bob = await person(gw, "bob")
        await gw.handle_inbound(message("bob's private plans", account="bob"))
        async with local_process.post(url(gw, "/api/session/local"), json={"client_id": "any-local-account"}) as resp:
            assert resp.status == 200
            body = await resp.json()
        assert body["operator"] is True and body["user_id"] != bob
        async with local_process.get(url(gw, f"/api/users/{bob}/sessions")) as resp:
            assert resp.status == 200 and (await resp.json())["sessions"], "another person's sessions, read"


def test_the_docs_say_so_plainly() -> None:
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    said = re.findall(r"[^|.]*every local OS account is the operator[^|]*", text)
    assert said, "docs/security.md does not say that every local OS account is the operator"
    assert any("POST /api/session/local" in s and "server.token" in s for s in said)
    threat_row = next(line for line in DOCS.read_text(encoding="utf-8").splitlines()
                      if line.startswith("| **Local processes of other OS accounts**"))  # fmt: skip
    assert "every local OS account is the operator" in threat_row and "/api/session/local" in threat_row
